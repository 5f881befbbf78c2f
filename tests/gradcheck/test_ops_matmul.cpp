// Finite-difference gradient checks of matmul (2-d, batched 3-d and 4-d, all
// four transpose combinations, a 2-d operand shared across the batch) and of
// the fused linear map (float64 engine).
// Tolerance: gradcheck.h's default (relative 1e-6, absolute floor 1e-8),
// orders of magnitude above float64 finite-difference noise (~1e-10) while a
// dropped or doubled term gives an error of order 1.
#include <vector>

#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;
using attnlab::testing::gradcheck;
using attnlab::testing::random_tensor;

namespace {

Var param(const Shape& shape, Rng& rng) { return Var(random_tensor(shape, rng), true); }

// The stored shape of an operand whose product form is (rows, cols),
// transposed in storage when `trans`.
Shape stored(Shape batch, int64_t rows, int64_t cols, bool trans) {
  batch.push_back(trans ? cols : rows);
  batch.push_back(trans ? rows : cols);
  return batch;
}

struct MatmulCase {
  Shape a_batch, b_batch;
  int64_t m, k, n;
};

void check_matmul_case(const MatmulCase& c, Rng& rng) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Shape sa = stored(c.a_batch, c.m, c.k, ta), sb = stored(c.b_batch, c.k, c.n, tb);
      INFO("matmul " << shape_str(sa) << (ta ? "^T" : "") << " x " << shape_str(sb) << (tb ? "^T" : ""));
      Var a = param(sa, rng), b = param(sb, rng);
      ATTNLAB_REQUIRE_GRADCHECK(
          gradcheck([ta, tb](const std::vector<Var>& in) { return matmul(in[0], in[1], ta, tb); }, {a, b}));
    }
}

}  // namespace

TEST_CASE("2-d matmul gradient matches finite differences for all transpose combinations", "[gradcheck][matmul]") {
  Rng rng(21);
  for (const MatmulCase& c : std::vector<MatmulCase>{
           {{}, {}, 3, 4, 2}, {{}, {}, 1, 5, 3}, {{}, {}, 4, 1, 2}, {{}, {}, 2, 3, 1}, {{}, {}, 1, 1, 1}})
    check_matmul_case(c, rng);
}

TEST_CASE("batched 3-d matmul gradient matches finite differences for all transpose combinations",
          "[gradcheck][matmul]") {
  Rng rng(22);
  for (const MatmulCase& c : std::vector<MatmulCase>{{{2}, {2}, 3, 4, 2}, {{1}, {1}, 2, 3, 5}, {{3}, {3}, 1, 2, 1}})
    check_matmul_case(c, rng);
}

TEST_CASE("batched 4-d matmul gradient matches finite differences for all transpose combinations",
          "[gradcheck][matmul]") {
  Rng rng(23);
  for (const MatmulCase& c : std::vector<MatmulCase>{{{2, 3}, {2, 3}, 2, 4, 3}, {{2, 1}, {2, 1}, 3, 2, 1}})
    check_matmul_case(c, rng);
}

TEST_CASE("matmul with a 2-d operand shared across the batch matches finite differences", "[gradcheck][matmul]") {
  Rng rng(24);
  for (const MatmulCase& c : std::vector<MatmulCase>{
           {{3}, {}, 2, 4, 3},     // shared b: stacked into one gemm when a is not transposed
           {{2, 2}, {}, 3, 2, 4},  // 4-d a, shared b
           {{1}, {}, 1, 3, 2},     // batch of one, single row
           {{}, {3}, 2, 4, 3},     // shared a
           {{}, {2, 2}, 3, 1, 2}})
    check_matmul_case(c, rng);
}

TEST_CASE("linear gradient matches finite differences with and without bias", "[gradcheck][linear]") {
  Rng rng(25);
  struct Case {
    Shape x;
    int64_t out;
  };
  for (const Case& c : std::vector<Case>{{{5, 4}, 3}, {{2, 3, 4}, 2}, {{4}, 3}, {{3, 1}, 1}, {{1, 2, 6}, 5}}) {
    const int64_t in = c.x.back();
    INFO("linear x " << shape_str(c.x) << " -> " << c.out);
    Var x = param(c.x, rng), w = param({c.out, in}, rng), b = param({c.out}, rng);
    ATTNLAB_REQUIRE_GRADCHECK(
        gradcheck([](const std::vector<Var>& v) { return linear(v[0], v[1], v[2]); }, {x, w, b}));
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& v) { return linear(v[0], v[1], Var()); }, {x, w}));
  }
}

TEST_CASE("linear equals matmul with a transposed weight plus a broadcast bias", "[gradcheck][linear]") {
  // Fused vs composed: values and gradients must agree to float64 rounding.
  Rng rng(26);
  Tensor xv = random_tensor({2, 3, 4}, rng), wv = random_tensor({5, 4}, rng), bv = random_tensor({5}, rng);
  Tensor proj = random_tensor({2, 3, 5}, rng);
  auto run = [&](bool fused) {
    Var x(xv, true), w(wv, true), b(bv, true);
    Var y = fused ? linear(x, w, b) : add(matmul(x, w, false, true), b);
    backward(sum(mul(y, Var(proj))));
    return std::vector<Tensor>{y.value(), x.grad(), w.grad(), b.grad()};
  };
  std::vector<Tensor> fused = run(true), composed = run(false);
  for (size_t t = 0; t < fused.size(); ++t) {
    INFO("tensor " << t << " (0 = value, then grads of x, w, b)");
    REQUIRE(fused[t].shape() == composed[t].shape());
    // 1e-12: both sides compute the same sums in float64, only the order may differ.
    for (int64_t i = 0; i < fused[t].numel(); ++i) REQUIRE(std::abs(fused[t][i] - composed[t][i]) < 1e-12);
  }
}

TEST_CASE("linear_relu gradient matches finite differences with and without bias", "[gradcheck][linear]") {
  // Random inputs put no pre-activation within the step h = 1e-6 of the kink
  // at 0 (the smallest |pre| for these seeds is far above it), so finite
  // differences see a differentiable function.
  Rng rng(27);
  for (const Shape& xs : std::vector<Shape>{{5, 4}, {2, 3, 4}, {4}, {1, 2, 6}}) {
    INFO("linear_relu x " << shape_str(xs) << " -> 3");
    Var x = param(xs, rng), w = param({3, xs.back()}, rng), b = param({3}, rng);
    ATTNLAB_REQUIRE_GRADCHECK(
        gradcheck([](const std::vector<Var>& v) { return linear_relu(v[0], v[1], v[2]); }, {x, w, b}));
    ATTNLAB_REQUIRE_GRADCHECK(
        gradcheck([](const std::vector<Var>& v) { return linear_relu(v[0], v[1], Var()); }, {x, w}));
  }
}

TEST_CASE("linear_relu equals relu of linear in value and gradients, including at exact zeros", "[gradcheck][linear]") {
  // Fused vs composed. The weight's first row is zero and so is the bias's
  // first entry: that output column is exactly 0, where both sides must take
  // the derivative as 0 (torch's convention). The rest has mixed signs.
  Rng rng(28);
  Tensor xv = random_tensor({2, 3, 4}, rng), wv = random_tensor({5, 4}, rng), bv = random_tensor({5}, rng);
  for (int64_t k = 0; k < 4; ++k) wv[k] = 0;
  bv[0] = 0;
  Tensor proj = random_tensor({2, 3, 5}, rng);
  auto run = [&](bool fused) {
    Var x(xv, true), w(wv, true), b(bv, true);
    Var y = fused ? linear_relu(x, w, b) : relu(linear(x, w, b));
    backward(sum(mul(y, Var(proj))));
    return std::vector<Tensor>{y.value(), x.grad(), w.grad(), b.grad()};
  };
  std::vector<Tensor> fused = run(true), composed = run(false);
  int64_t zeros = 0, positives = 0;
  for (int64_t i = 0; i < fused[0].numel(); ++i) (fused[0][i] > 0 ? positives : zeros) += 1;
  REQUIRE(zeros > 6);  // the zero column (6 rows) and some negative pre-activations
  REQUIRE(positives > 0);
  for (size_t t = 0; t < fused.size(); ++t) {
    INFO("tensor " << t << " (0 = value, then grads of x, w, b)");
    REQUIRE(fused[t].shape() == composed[t].shape());
    // 1e-12: both sides compute the same sums in float64, only the order may differ.
    for (int64_t i = 0; i < fused[t].numel(); ++i) REQUIRE(std::abs(fused[t][i] - composed[t][i]) < 1e-12);
  }
}

TEST_CASE("linear_relu rejects mismatched shapes naming the op and both shapes", "[linear]") {
  Var x(Tensor({2, 3}), true), w(Tensor({4, 5}), true), b(Tensor({4}), true);
  REQUIRE_THROWS_WITH(linear_relu(x, w, b), Catch::Contains("linear_relu") && Catch::Contains("(2, 3)") &&
                                                Catch::Contains("(4, 5)"));
}
