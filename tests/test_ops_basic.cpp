// Float32 behaviour of the basic ops: values (broadcasting, matmul paths,
// data movement, reductions), error messages, masking, dropout statistics and
// determinism, embedding. Gradients are checked in tests/gradcheck (float64).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "framework/ops/ops.h"

using namespace attnlab;
using Catch::Contains;

namespace {

Tensor iota(Shape shape, Real start = 0, Real step = 1) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = start + step * static_cast<Real>(i);
  return t;
}

Tensor random_tensor(Shape shape, Rng& rng) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(-1, 1));
  return t;
}

// Relative closeness for float32 sums of a few hundred products of values in
// [-1, 1]: rounding is ~1e-7 per operation, so 1e-4 is ample yet far below
// any real error (which would be of the size of a term, ~1e-2 or more).
bool close(Real a, Real b, Real tol = 1e-4) { return std::abs(a - b) <= tol * std::max<Real>(1, std::abs(b)); }

}  // namespace

TEST_CASE("a non-broadcastable add names the op and both shapes", "[ops][errors]") {
  Var a(Tensor({2, 3})), b(Tensor({4}));
  REQUIRE_THROWS_AS(add(a, b), ShapeError);
  REQUIRE_THROWS_WITH(add(a, b), Contains("add") && Contains("(2, 3)") && Contains("(4,)"));
  REQUIRE_THROWS_WITH(mul(Var(Tensor({2, 3, 4})), Var(Tensor({3, 2}))),
                      Contains("mul") && Contains("(2, 3, 4)") && Contains("(3, 2)"));
}

TEST_CASE("a matmul with mismatched inner sizes names both shapes and both sizes", "[ops][errors]") {
  Var a(Tensor({2, 3})), b(Tensor({4, 5}));
  REQUIRE_THROWS_AS(matmul(a, b), ShapeError);
  REQUIRE_THROWS_WITH(matmul(a, b), Contains("matmul") && Contains("(2, 3)") && Contains("(4, 5)") &&
                                        Contains("3 and 4"));
  // Batch dims that are neither equal nor shared.
  REQUIRE_THROWS_WITH(matmul(Var(Tensor({2, 3, 4})), Var(Tensor({3, 4, 5}))),
                      Contains("(2, 3, 4)") && Contains("(3, 4, 5)"));
  REQUIRE_THROWS_AS(matmul(Var(Tensor({3})), Var(Tensor({3, 2}))), ShapeError);
}

TEST_CASE("linear with the wrong input width names the input and weight shapes", "[ops][errors]") {
  Var x(Tensor({2, 5})), w(Tensor({4, 3})), b(Tensor({4}));
  REQUIRE_THROWS_WITH(linear(x, w, b), Contains("(2, 5)") && Contains("(4, 3)"));
  REQUIRE_THROWS_WITH(linear(Var(Tensor({2, 3})), w, Var(Tensor({3}))), Contains("bias") && Contains("(3,)"));
}

TEST_CASE("shape ops reject bad requests with typed errors naming the values", "[ops][errors]") {
  Var x(Tensor({2, 3, 4}));
  REQUIRE_THROWS_WITH(reshape(x, {5, -1}), Contains("(2, 3, 4)") && Contains("(5, -1)"));
  REQUIRE_THROWS_AS(reshape(x, {-1, -1}), ShapeError);
  REQUIRE_THROWS_WITH(reshape(x, {5, 5}), Contains("(2, 3, 4)") && Contains("(5, 5)"));
  REQUIRE_THROWS_AS(split(x, 1, {1, 1}), ValueError);
  REQUIRE_THROWS_WITH(split(x, 1, {1, 1}), Contains("1, 1") && Contains("3"));
  REQUIRE_THROWS_AS(split(x, 1, {4, -1}), ValueError);
  REQUIRE_THROWS_WITH(concat({x, Var(Tensor({2, 2, 5}))}, 1), Contains("(2, 3, 4)") && Contains("(2, 2, 5)"));
  REQUIRE_THROWS_AS(transpose(x, 0, 3), ShapeError);
  REQUIRE_THROWS_AS(sum(x, -4), ShapeError);
}

TEST_CASE("binary ops broadcast rows, columns, scalars and general shapes to numpy's values", "[ops][broadcast]") {
  Var a(iota({2, 3}));  // [[0 1 2] [3 4 5]]
  Tensor row = add(a, Var(Tensor::from({3}, {10, 20, 30}))).value();
  REQUIRE(row.shape() == Shape{2, 3});
  CHECK(row[0] == 10);
  CHECK(row[4] == 24);
  Tensor col = mul(a, Var(Tensor::from({2, 1}, {2, -1}))).value();
  CHECK(col[2] == 4);
  CHECK(col[5] == -5);
  Tensor scalar = sub(Var(Tensor::from({}, {1})), a).value();
  REQUIRE(scalar.shape() == Shape{2, 3});
  CHECK(scalar[5] == -4);
  Tensor quotient = div(a, Var(Tensor::from({1}, {2}))).value();
  CHECK(quotient[3] == 1.5f);

  // (2, 1, 4) + (3, 1) -> (2, 3, 4): out[i, j, k] = x[i, 0, k] + y[j, 0].
  Tensor x = iota({2, 1, 4}), y = iota({3, 1}, 100, 100);
  Tensor out = add(Var(x), Var(y)).value();
  REQUIRE(out.shape() == Shape{2, 3, 4});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) REQUIRE(out[(i * 3 + j) * 4 + k] == x[i * 4 + k] + y[j]);
}

TEST_CASE("large broadcasts take the parallel paths and still match a plain loop", "[ops][broadcast]") {
  // Sizes above the parallel threshold (2^16 elements), both forward and the
  // summed-back gradient of the broadcast operands.
  Rng rng(5);
  const int64_t B = 64, T = 33, d = 40;
  Var x(random_tensor({B, T, d}, rng), true);
  Var bias(random_tensor({d}, rng), true);
  Var col(random_tensor({B, T, 1}, rng), true);
  Var y = mul(add(x, bias), col);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t k = 0; k < d; ++k)
      REQUIRE(y.value()[i * d + k] == (x.value()[i * d + k] + bias.value()[k]) * col.value()[i]);
  backward(sum(y));
  for (int64_t k = 0; k < d; ++k) {
    double expect = 0;  // dL/dbias[k] = sum over rows of col
    for (int64_t i = 0; i < B * T; ++i) expect += col.value()[i];
    REQUIRE(close(bias.grad()[k], static_cast<Real>(expect), 1e-3f));
  }
  for (int64_t i = 0; i < B * T; ++i) {
    double expect = 0;
    for (int64_t k = 0; k < d; ++k) expect += x.value()[i * d + k] + bias.value()[k];
    REQUIRE(close(col.grad()[i], static_cast<Real>(expect), 1e-4f));
    REQUIRE(x.grad()[i * d] == col.value()[i]);
  }
}

TEST_CASE("mul and sum give hand-computed gradients (the gradcheck's own projection uses them)", "[ops]") {
  Var x(Tensor::from({3}, {1, 2, 3}), true), y(Tensor::from({3}, {4, 5, 6}), true);
  Var s = sum(mul(x, y));
  REQUIRE(s.shape().empty());
  REQUIRE(s.item() == 32);
  backward(s);
  CHECK(x.grad()[2] == 6);
  CHECK(y.grad()[0] == 1);
}

TEST_CASE("ops on constants record no graph", "[ops]") {
  Var a(iota({2, 2})), b(iota({2}));
  Var y = matmul(add(a, b), a);
  REQUIRE_FALSE(y.requires_grad());
  REQUIRE(y.node()->inputs.empty());
}

TEST_CASE("unary ops give their textbook values", "[ops][unary]") {
  Var x(Tensor::from({4}, {-1, 0, 0.5f, 1}));
  Tensor g = gelu(x).value();
  // x * Phi(x): Phi(1) = 0.8413447, Phi(0.5) = 0.6914625; float32 rounding ~1e-7.
  CHECK(g[0] == Approx(-0.1586553).margin(1e-6));
  CHECK(g[1] == 0);
  CHECK(g[2] == Approx(0.3457312).margin(1e-6));
  CHECK(g[3] == Approx(0.8413447).margin(1e-6));
  Tensor r = relu(x).value();
  CHECK(r[0] == 0);
  CHECK(r[3] == 1);
  CHECK(attnlab::exp(x).value()[3] == Approx(std::exp(1.0)));
  CHECK(attnlab::tanh(x).value()[0] == Approx(std::tanh(-1.0)));
  CHECK(attnlab::sqrt(Var(Tensor::from({1}, {9}))).item() == Approx(3));
  CHECK(attnlab::log(Var(Tensor::from({1}, {1}))).item() == 0);
  CHECK(scale(x, 2).value()[2] == 1);
  CHECK(add_scalar(x, 2).value()[0] == 1);
  CHECK(neg(x).value()[3] == -1);
}

TEST_CASE("masked_fill with -inf gives -inf exactly where the mask is set", "[ops][mask]") {
  const Real inf = std::numeric_limits<Real>::infinity();
  Var scores(iota({2, 3, 3}), true);
  Tensor mask = causal_mask(3, 3);
  Var y = masked_fill(scores, mask, -inf);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        Real v = y.value()[(b * 3 + i) * 3 + j];
        if (j > i) REQUIRE(v == -inf);
        else REQUIRE(v == scores.value()[(b * 3 + i) * 3 + j]);
      }
  // Masked positions get no gradient, the others all of it.
  backward(sum(masked_fill(scores, mask, 0)));
  CHECK(scores.grad()[1] == 0);
  CHECK(scores.grad()[3] == 1);
  REQUIRE_THROWS_WITH(masked_fill(scores, Tensor({2, 3}), 0), Contains("(2, 3)") && Contains("(2, 3, 3)"));
}

TEST_CASE("causal_mask hides exactly the future keys, offset when T_k > T_q", "[ops][mask]") {
  Tensor m = causal_mask(3, 3);
  CHECK(m[0 * 3 + 1] == 1);
  CHECK(m[1 * 3 + 1] == 0);
  CHECK(m[2 * 3 + 0] == 0);
  CHECK(m.flat().sum() == 3);
  // Two queries after two cached keys: query i sits at key position i + 2.
  Tensor o = causal_mask(2, 4);
  CHECK(o[0 * 4 + 2] == 0);
  CHECK(o[0 * 4 + 3] == 1);
  CHECK(o[1 * 4 + 3] == 0);
  CHECK(o.flat().sum() == 1);
}

TEST_CASE("matmul values agree with a plain loop on every path", "[ops][matmul]") {
  Rng rng(7);
  auto naive = [](const Tensor& a, const Tensor& b, int64_t batches, int64_t m, int64_t k, int64_t n, bool ta,
                  bool tb, bool b_shared) {
    Tensor c({batches, m, n});
    for (int64_t z = 0; z < batches; ++z)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t r = 0; r < k; ++r) {
            Real av = ta ? a[z * k * m + r * m + i] : a[z * m * k + i * k + r];
            int64_t zb = b_shared ? 0 : z;
            Real bv = tb ? b[zb * n * k + j * k + r] : b[zb * k * n + r * n + j];
            s += static_cast<double>(av) * bv;
          }
          c[(z * m + i) * n + j] = static_cast<Real>(s);
        }
    return c;
  };
  // Batch 48 of 16x24x20 is above the parallel threshold.
  const int64_t batches = 48, m = 16, k = 24, n = 20;
  for (bool b_shared : {false, true})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO("shared " << b_shared << " ta " << ta << " tb " << tb);
        Tensor a = random_tensor({batches, ta ? k : m, ta ? m : k}, rng);
        Shape sb = {tb ? n : k, tb ? k : n};
        if (!b_shared) sb.insert(sb.begin(), batches);
        Tensor b = random_tensor(sb, rng);
        Tensor c = matmul(Var(a), Var(b), ta, tb).value();
        REQUIRE(c.shape() == Shape{batches, m, n});
        Tensor expect = naive(a, b, batches, m, k, n, ta, tb, b_shared);
        for (int64_t i = 0; i < c.numel(); ++i) REQUIRE(close(c[i], expect[i]));
      }
}

TEST_CASE("linear computes x W^T + b over any leading dims", "[ops][matmul]") {
  Var x(iota({2, 1, 3}));                                // [[0 1 2]], [[3 4 5]]
  Var w(Tensor::from({2, 3}, {1, 0, 0, 1, 1, 1}));      // picks x0; sums x
  Var b(Tensor::from({2}, {10, 20}));
  Tensor y = linear(x, w, b).value();
  REQUIRE(y.shape() == Shape{2, 1, 2});
  CHECK(y[0] == 10);
  CHECK(y[1] == 23);
  CHECK(y[2] == 13);
  CHECK(y[3] == 32);
  CHECK(linear(x, w, Var()).value()[3] == 12);
}

TEST_CASE("transpose, split, concat and reshape move values to the right places", "[ops][shape]") {
  Tensor x = iota({2, 3, 4});
  Tensor t = transpose(Var(x), 0, 2).value();  // (4, 3, 2)
  REQUIRE(t.shape() == Shape{4, 3, 2});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) REQUIRE(t[(k * 3 + j) * 2 + i] == x[(i * 3 + j) * 4 + k]);
  std::vector<Var> parts = split(Var(x), 1, {2, 1});
  REQUIRE(parts[0].shape() == Shape{2, 2, 4});
  REQUIRE(parts[1].shape() == Shape{2, 1, 4});
  CHECK(parts[1].value()[0] == 8);
  CHECK(parts[1].value()[4] == 20);
  Tensor back = concat({parts[0], parts[1]}, 1).value();
  REQUIRE(back.shape() == x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) REQUIRE(back[i] == x[i]);
  REQUIRE(reshape(Var(x), {-1, 6}).shape() == Shape{4, 6});
}

TEST_CASE("sum and mean reduce along an axis with and without keepdim", "[ops][reduce]") {
  Var x(iota({2, 3}));  // [[0 1 2] [3 4 5]]
  Tensor s0 = sum(x, 0).value();
  REQUIRE(s0.shape() == Shape{3});
  CHECK(s0[2] == 7);
  Tensor m1 = mean(x, -1, true).value();
  REQUIRE(m1.shape() == Shape{2, 1});
  CHECK(m1[1] == 4);
  CHECK(sum(x).item() == 15);
  CHECK(mean(x).item() == 2.5f);
  REQUIRE(sum(x).shape() == Shape{});
}

TEST_CASE("embedding gathers rows and rejects an id outside 0..V-1 by name", "[ops][embedding]") {
  Var w(iota({5, 2}), true);
  IntTensor ids({2, 2});
  ids.data = {4, 0, 4, 1};
  Var y = embedding(w, ids);
  REQUIRE(y.shape() == Shape{2, 2, 2});
  CHECK(y.value()[0] == 8);
  CHECK(y.value()[7] == 3);
  backward(sum(y));
  CHECK(w.grad()[8] == 2);  // row 4 used twice
  CHECK(w.grad()[4] == 0);  // row 2 unused
  ids.data[2] = 5;
  REQUIRE_THROWS_AS(embedding(w, ids), ValueError);
  REQUIRE_THROWS_WITH(embedding(w, ids), Contains("id 5") && Contains("V = 5"));
  ids.data[2] = -1;
  REQUIRE_THROWS_WITH(embedding(w, ids), Contains("id -1"));
}

TEST_CASE("dropout masks are reproducible per seed and differ across seeds", "[ops][dropout]") {
  Var x(Tensor({1000}, 1));
  auto draw = [&](uint64_t seed) {
    Rng rng(seed);
    return dropout(x, 0.5f, rng, true).value();
  };
  Tensor a = draw(3), b = draw(3), c = draw(4);
  int64_t same_ab = 0, same_ac = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same_ab += a[i] == b[i];
    same_ac += a[i] == c[i];
  }
  REQUIRE(same_ab == 1000);
  // Independent masks with p = 0.5 agree on ~500 of 1000 entries (sd ~16);
  // 900 would be 25 sd away.
  REQUIRE(same_ac < 900);
  // Successive draws from one generator differ too.
  Rng rng(3);
  Tensor first = dropout(x, 0.5f, rng, true).value(), second = dropout(x, 0.5f, rng, true).value();
  int64_t same = 0;
  for (int64_t i = 0; i < 1000; ++i) same += first[i] == second[i];
  REQUIRE(same < 900);
}

TEST_CASE("dropout keeps about 1-p of a large tensor, scaled by 1/(1-p)", "[ops][dropout]") {
  const int64_t n = 200000;
  const float p = 0.3f;
  Var x(Tensor({n}, 2), true);
  Rng rng(11);
  Var y = dropout(x, p, rng, true);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y.value()[i] != 0) {
      ++kept;
      REQUIRE(y.value()[i] == Approx(2 / (1 - p)));
    }
  }
  // The kept fraction has sd sqrt(p(1-p)/n) ~ 0.001; 0.006 is six sd.
  REQUIRE(std::abs(static_cast<double>(kept) / n - (1 - p)) < 0.006);
  // The gradient is the same mask and scale.
  backward(sum(y));
  for (int64_t i = 0; i < n; i += 997) REQUIRE(x.grad()[i] == Approx(y.value()[i] / 2));
}

TEST_CASE("dropout is the identity in eval mode and at p = 0, and rejects p outside 0 <= p < 1", "[ops][dropout]") {
  Var x(iota({3, 4}), true);
  Rng rng(1);
  REQUIRE(dropout(x, 0.5f, rng, false).node() == x.node());
  REQUIRE(dropout(x, 0, rng, true).node() == x.node());
  REQUIRE_THROWS_AS(dropout(x, 1, rng, true), ValueError);
  REQUIRE_THROWS_AS(dropout(x, -0.1f, rng, true), ValueError);
  REQUIRE_THROWS_WITH(dropout(x, 1.5f, rng, true), Contains("1.5"));
}

TEST_CASE("add's backward overwrites a fresh gradient and adds to one that has a contribution already",
          "[ops][autograd]") {
  // x is an intermediate (its gradient has no buffer until backward reaches a consumer).
  // Backward runs consumers newest first: with add newer, add's contribution is the first
  // (written over an uninitialised buffer); with mul newer, add's comes second (added).
  // Either way dL/dx = 1 (add) + 3 (mul); add(x, x) gives 2 through the one buffer.
  for (int add_first : {0, 1}) {
    Var leaf(iota({2, 5}, -1, 0.5f), true);
    Var x = mul(leaf, Var(Tensor({1}, 1.0f)));
    Var c(iota({2, 5}));
    Var via_add, via_mul;
    if (add_first) {
      via_mul = mul(x, Var(Tensor({1}, 3.0f)));
      via_add = add(x, c);
    } else {
      via_add = add(x, c);
      via_mul = mul(x, Var(Tensor({1}, 3.0f)));
    }
    backward(add(sum(via_add), sum(via_mul)));
    INFO("add " << (add_first ? "newer" : "older") << " than mul");
    for (int64_t i = 0; i < 10; ++i) REQUIRE(leaf.grad()[i] == 4.0f);
  }
  Var leaf(iota({3, 4}), true);
  Var x = mul(leaf, Var(Tensor({1}, 1.0f)));
  backward(sum(add(x, x)));
  for (int64_t i = 0; i < 12; ++i) REQUIRE(leaf.grad()[i] == 2.0f);
  // A broadcast operand (a bias) still sums over the rows it was added to.
  Var bias(iota({4}), true);
  Var rows = mul(Var(iota({3, 4}), true), Var(Tensor({1}, 1.0f)));
  backward(sum(add(rows, bias)));
  for (int64_t j = 0; j < 4; ++j) REQUIRE(bias.grad()[j] == 3.0f);
}
