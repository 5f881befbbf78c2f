// Float32 edge cases of the fused kernels: huge logits, fully masked rows,
// attention weight properties, known cross-entropy values, shape and value
// errors, and that the multi-threaded paths compute what one row at a time does.
#include <omp.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "framework/ops/ops.h"
#include "framework/random.h"

using namespace attnlab;

namespace {

const Real kInf = std::numeric_limits<Real>::infinity();

Tensor random_tensor(Shape shape, Rng& rng, double lo = -1, double hi = 1) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(lo, hi));
  return t;
}

bool all_finite(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t[i])) return false;
  return true;
}

IntTensor targets_of(Shape shape, std::vector<int32_t> values) {
  IntTensor t(std::move(shape));
  t.data = std::move(values);
  return t;
}

}  // namespace

TEST_CASE("softmax and log_softmax of logits of +-1e4 and 1e30 stay finite and correct", "[fused][softmax]") {
  // Without the max subtraction exp(1e4) overflows float32 to inf and the row
  // becomes NaN. Tolerance 1e-6: float32 rounding of O(1) values.
  Var x(Tensor::from({3, 3}, {1e4f, -1e4f, 1e4f - 1, 1e30f, 0, -1e30f, -1e30f, -1e30f, -1e30f}));
  Var y = softmax(x);
  REQUIRE(all_finite(y.value()));
  const Real e = std::exp(Real(-1));
  CHECK(y.value()[0] == Approx(1 / (1 + e)).margin(1e-6));
  CHECK(y.value()[1] == 0);
  CHECK(y.value()[2] == Approx(e / (1 + e)).margin(1e-6));
  CHECK(y.value()[3] == 1);
  CHECK(y.value()[4] == 0);
  CHECK(y.value()[5] == 0);
  for (int j = 6; j < 9; ++j) CHECK(y.value()[j] == Approx(1.0 / 3).margin(1e-6));  // equal huge negatives

  Var ly = log_softmax(x);
  REQUIRE(all_finite(ly.value()));
  CHECK(ly.value()[0] == Approx(-std::log1p(e)).margin(1e-6));
  CHECK(ly.value()[1] == Approx(-2e4 - std::log1p(e)).epsilon(1e-6));
  CHECK(ly.value()[5] == Approx(-2e30).epsilon(1e-6));
}

TEST_CASE("a fully masked softmax row is all zeros, never NaN, and passes a zero gradient", "[fused][softmax]") {
  Tensor t = Tensor::from({2, 3}, {-kInf, -kInf, -kInf, 0.5f, -kInf, 1.5f});
  Var x(t, true);
  Var y = softmax(x);
  for (int j = 0; j < 3; ++j) REQUIRE(y.value()[j] == 0);
  REQUIRE(y.value()[4] == 0);  // a masked entry is exactly 0
  REQUIRE(y.value()[3] + y.value()[5] == Approx(1));
  backward(sum(mul(y, Var(Tensor::from({2, 3}, {1, 2, 3, 4, 5, 6})))));
  REQUIRE(all_finite(x.grad()));
  for (int j = 0; j < 3; ++j) REQUIRE(x.grad()[j] == 0);
  REQUIRE(x.grad()[4] == 0);
}

TEST_CASE("a fully masked log_softmax row is all -inf and passes a zero gradient", "[fused][softmax]") {
  Var x(Tensor::from({2, 2}, {-kInf, -kInf, 1, 2}), true);
  Var y = log_softmax(x);
  REQUIRE(y.value()[0] == -kInf);
  REQUIRE(y.value()[1] == -kInf);
  REQUIRE(std::isfinite(y.value()[2]));
  // Select the finite row only (a projection touching -inf would be NaN).
  backward(sum(mul(y, Var(Tensor::from({2, 2}, {0, 0, 1, -1})))));
  REQUIRE(all_finite(x.grad()));
  REQUIRE(x.grad()[0] == 0);
  REQUIRE(x.grad()[1] == 0);
}

TEST_CASE("the row kernels may work in place", "[fused][softmax]") {
  std::vector<Real> row{1, 3, -kInf, 2}, expect(4);
  softmax_row(row.data(), expect.data(), 4);
  softmax_row(row.data(), row.data(), 4);
  REQUIRE(row == expect);
  std::vector<Real> lrow{1, 3, 0, 2}, lexpect(4);
  log_softmax_row(lrow.data(), lexpect.data(), 4);
  log_softmax_row(lrow.data(), lrow.data(), 4);
  REQUIRE(lrow == lexpect);
}

TEST_CASE("rows of 16, 32 and 64 values (attention's keys in S, M, L) give the bits of the chunked row kernel: "
          "masked, fully masked, underflowing, huge, at every alignment, in place", "[fused][softmax]") {
  Rng rng(7);
  alignas(64) Real storage[64 + 16];
  std::vector<Real> fixed(64), chunked(64);
  int64_t rows = 0;
  for (int64_t n : {16, 32, 64})
    for (int kind = 0; kind < 5; ++kind)
      for (int64_t offset = 0; offset < 16; ++offset) {
        Real* x = storage + offset;  // every position modulo the SIMD width
        for (int64_t j = 0; j < n; ++j) x[j] = static_cast<Real>(rng.uniform(-8, 8));
        if (kind == 1)
          for (int64_t j = 0; j < n; j += 3) x[j] = kNegInf;  // masked keys
        if (kind == 2)
          for (int64_t j = 0; j < n; ++j) x[j] = kNegInf;  // a fully masked row
        if (kind == 3) x[n / 2] = 200;  // every other exp underflows: exactly 0
        if (kind == 4) x[1] = 1e30f, x[2] = -1e30f;
        detail::softmax_row_chunked(x, chunked.data(), n);
        softmax_row(x, fixed.data(), n);
        INFO("n " << n << " kind " << kind << " offset " << offset);
        for (int64_t j = 0; j < n; ++j) REQUIRE(fixed[size_t(j)] == chunked[size_t(j)]);
        softmax_row(x, x, n);  // in place
        for (int64_t j = 0; j < n; ++j) REQUIRE(x[j] == chunked[size_t(j)]);
        if (kind == 1) REQUIRE(fixed[0] == 0);
        if (kind == 3) REQUIRE(fixed[0] == 0);
        ++rows;
      }
  REQUIRE(rows == 3 * 5 * 16);
}

TEST_CASE("multi-threaded softmax computes exactly what the row kernel does row by row", "[fused][softmax]") {
  // 512 x 128 is above the parallel threshold; rows are independent, so the
  // result must be bitwise that of the serial row kernel.
  Rng rng(1);
  Var x(random_tensor({4, 128, 128}, rng, -10, 10));
  Var y = softmax(x);
  Var ly = log_softmax(x);
  std::vector<Real> row(128);
  int64_t mismatches = 0;
  for (int64_t r = 0; r < 512; ++r) {
    softmax_row(x.value().data() + r * 128, row.data(), 128);
    for (int64_t j = 0; j < 128; ++j) mismatches += y.value()[r * 128 + j] != row[static_cast<size_t>(j)];
    log_softmax_row(x.value().data() + r * 128, row.data(), 128);
    for (int64_t j = 0; j < 128; ++j) mismatches += ly.value()[r * 128 + j] != row[static_cast<size_t>(j)];
  }
  REQUIRE(mismatches == 0);
}

TEST_CASE("identical rows give bitwise identical results wherever they sit in memory", "[fused]") {
  // Rows of 37 values start at every alignment modulo the SIMD width. Eigen
  // would evaluate an unaligned head with scalar code (another exp, another
  // summation order) unless the kernels guard against it; a resumed run or a
  // sliced tensor would then not reproduce bitwise.
  Rng rng(7);
  const int64_t rows = 16, n = 37;
  Tensor one = random_tensor({n}, rng, -5, 5), g = random_tensor({n}, rng);
  Tensor x({rows, n}), dy({rows, n});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) x[r * n + j] = one[j], dy[r * n + j] = g[j];
  auto rows_identical = [&](const Tensor& t) {
    for (int64_t r = 1; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        if (t[r * n + j] != t[j]) return false;
    return true;
  };
  for (int kind = 0; kind < 3; ++kind) {
    INFO("kernel " << (kind == 0 ? "softmax" : kind == 1 ? "log_softmax" : "layer_norm"));
    Var xv(x, true);
    Var y = kind == 0 ? softmax(xv) : kind == 1 ? log_softmax(xv) : layer_norm(xv, Var(), Var());
    backward(sum(mul(y, Var(dy))));
    REQUIRE(rows_identical(y.value()));
    REQUIRE(rows_identical(xv.grad()));
  }
  Var xv(x, true);
  backward(cross_entropy(xv, IntTensor({rows}, 3)));
  REQUIRE(rows_identical(xv.grad()));
}

TEST_CASE("cross_entropy matches hand-computed and torch values on a tiny case", "[fused][cross_entropy]") {
  // Tolerance 1e-6 relative: float32 rounding of O(1) values.
  Var x(Tensor::from({3, 3}, {1, 2, 3, 1, 1, 1, 0.5f, -1, 2}), true);
  IntTensor t = targets_of({3}, {2, 0, -100});
  // By hand: row 0: log(e + e^2 + e^3) - 3; row 1: log 3; row 2 ignored.
  const double row0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;
  const double row1 = std::log(3.0);
  Var loss = cross_entropy(x, t);
  REQUIRE(loss.shape() == Shape{});
  CHECK(loss.item() == Approx((row0 + row1) / 2).epsilon(1e-6));
  // torch.nn.functional.cross_entropy on the same inputs (float64, torch 1.13).
  CHECK(loss.item() == Approx(0.7531091265562451).epsilon(1e-6));
  CrossEntropyOptions smooth;
  smooth.label_smoothing = 0.1f;
  CHECK(cross_entropy(x, t, smooth).item() == Approx(0.8031091265562451).epsilon(1e-6));
  CHECK(cross_entropy(x, targets_of({3}, {2, 0, 1}), smooth).item() == Approx(1.5658431832565494).epsilon(1e-6));

  // Gradient: (softmax - onehot) / count on the counted rows, 0 on the ignored one.
  backward(loss);
  const double z0 = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(x.grad()[0] == Approx(std::exp(1.0) / z0 / 2).epsilon(1e-6));
  CHECK(x.grad()[2] == Approx((std::exp(3.0) / z0 - 1) / 2).epsilon(1e-6));
  CHECK(x.grad()[3] == Approx((1.0 / 3 - 1) / 2).epsilon(1e-6));
  for (int j = 6; j < 9; ++j) CHECK(x.grad()[j] == 0);
}

TEST_CASE("cross_entropy of logits of +-1e4 and 1e30 is finite and exact", "[fused][cross_entropy]") {
  Var x(Tensor::from({1, 3}, {1e4f, -1e4f, 0}), true);
  Var loss = cross_entropy(x, targets_of({1}, {1}));
  REQUIRE(loss.item() == Approx(2e4).epsilon(1e-6));  // log-sum-exp = 1e4, minus (-1e4)
  backward(loss);
  REQUIRE(all_finite(x.grad()));
  CHECK(x.grad()[0] == Approx(1));
  CHECK(x.grad()[1] == Approx(-1));
  CHECK(x.grad()[2] == 0);
  REQUIRE(cross_entropy(x, targets_of({1}, {0})).item() == 0);

  // torch gives 9.000000135427196e+29 (float32 rounding of 1e30) and grad (0.9, -0.9).
  Var y(Tensor::from({1, 2}, {1e30f, 0}), true);
  CrossEntropyOptions smooth;
  smooth.label_smoothing = 0.2f;
  Var big = cross_entropy(y, targets_of({1}, {1}), smooth);
  REQUIRE(std::isfinite(big.item()));
  REQUIRE(big.item() == Approx(0.9e30).epsilon(1e-6));
  backward(big);
  CHECK(y.grad()[0] == Approx(0.9));
  CHECK(y.grad()[1] == Approx(-0.9));
}

TEST_CASE("cross_entropy with every target ignored is 0 with a zero gradient", "[fused][cross_entropy]") {
  Var x(Tensor::from({2, 2}, {1, 2, 3, 4}), true);
  Var loss = cross_entropy(x, targets_of({2}, {-100, -100}));
  REQUIRE(loss.item() == 0);
  backward(loss);
  REQUIRE(x.has_grad());
  for (int i = 0; i < 4; ++i) REQUIRE(x.grad()[i] == 0);
}

TEST_CASE("cross_entropy rejects out-of-range targets and mismatched shapes, naming them", "[fused][cross_entropy]") {
  Var x(Tensor({2, 3, 5}));
  REQUIRE_THROWS_AS(cross_entropy(x, targets_of({2, 3}, {0, 1, 2, 5, 4, 3})), ValueError);
  REQUIRE_THROWS_WITH(cross_entropy(x, targets_of({2, 3}, {0, 1, 2, 5, 4, 3})),
                      Catch::Contains("target 5") && Catch::Contains("V = 5"));
  REQUIRE_THROWS_WITH(cross_entropy(x, targets_of({2, 3}, {0, -1, 2, 1, 4, 3})), Catch::Contains("target -1"));
  REQUIRE_THROWS_AS(cross_entropy(x, targets_of({3, 2}, {0, 1, 2, 1, 4, 3})), ShapeError);
  REQUIRE_THROWS_WITH(cross_entropy(x, targets_of({6}, {0, 1, 2, 1, 4, 3})),
                      Catch::Contains("(2, 3)") && Catch::Contains("(6,)"));
  CrossEntropyOptions bad;
  bad.label_smoothing = 1.5f;
  REQUIRE_THROWS_AS(cross_entropy(x, targets_of({2, 3}, {0, 1, 2, 1, 4, 3}), bad), ValueError);
}

TEST_CASE("layer_norm rows have mean 0 and variance 1 even far from the origin", "[fused][layer_norm]") {
  // 1000 + U(-1, 1): a one-pass E[x^2] - E[x]^2 would lose most digits in
  // float32. Tolerance 1e-3: the float32 input itself carries ~6e-5 absolute
  // rounding per entry, relative to a spread of ~0.6.
  Rng rng(2);
  Tensor t = random_tensor({8, 64}, rng);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] += 1000;
  Var y = layer_norm(Var(t), Var(), Var(), 0);
  for (int64_t r = 0; r < 8; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < 64; ++j) m += y.value()[r * 64 + j];
    m /= 64;
    for (int64_t j = 0; j < 64; ++j) v += (y.value()[r * 64 + j] - m) * (y.value()[r * 64 + j] - m);
    v /= 64;
    CHECK(std::abs(m) < 1e-3);
    CHECK(v == Approx(1).margin(1e-3));
  }
}

TEST_CASE("layer_norm rejects affine terms of the wrong size, naming the shapes", "[fused][layer_norm]") {
  Var x(Tensor({2, 4}));
  REQUIRE_THROWS_AS(layer_norm(x, Var(Tensor({3})), Var()), ShapeError);
  REQUIRE_THROWS_WITH(layer_norm(x, Var(), Var(Tensor({4, 1}))),
                      Catch::Contains("(4, 1)") && Catch::Contains("(2, 4)"));
}

TEST_CASE("attention weights sum to 1 over keys and are exactly 0 on masked keys", "[fused][attention]") {
  Rng rng(3);
  const int64_t B = 2, h = 3, T_q = 4, T_k = 6, d_k = 5, d_v = 2;
  Var q(random_tensor({B, h, T_q, d_k}, rng, -3, 3));
  Var k(random_tensor({B, h, T_k, d_k}, rng, -3, 3));
  Var v(random_tensor({B, h, T_k, d_v}, rng));
  Tensor pad = Tensor::from({B, T_k}, {0, 0, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1});  // item 1: only key 0 is real
  AttentionMask mask;
  mask.causal = true;
  mask.key_padding = &pad;
  Tensor w;
  Var out = attention(q, k, v, 0.5f, mask, &w);
  REQUIRE(w.shape() == Shape{B, h, T_q, T_k});
  REQUIRE(all_finite(out.value()));
  const int64_t shift = T_k - T_q;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t i = 0; i < T_q; ++i) {
        double total = 0;
        for (int64_t j = 0; j < T_k; ++j) {
          const Real p = w[((b * h + hh) * T_q + i) * T_k + j];
          const bool masked = j > i + shift || pad[b * T_k + j] != 0;
          if (masked) REQUIRE(p == 0);
          REQUIRE(p >= 0);
          total += p;
        }
        REQUIRE(total == Approx(1).epsilon(1e-5));  // float32 sum of <= 6 terms
      }
  // Item 1 attends only to key 0, so its output rows are v's row 0 exactly.
  for (int64_t hh = 0; hh < h; ++hh)
    for (int64_t i = 0; i < T_q; ++i)
      for (int64_t c = 0; c < d_v; ++c)
        REQUIRE(out.value()[((h + hh) * T_q + i) * d_v + c] == v.value()[((h + hh) * T_k) * d_v + c]);
}

TEST_CASE("fully masked attention rows give zero weights, zero output and zero gradient", "[fused][attention]") {
  Rng rng(4);
  // Causal with T_q > T_k: query i sees keys j <= i - 2, so queries 0 and 1 see nothing.
  Var q(random_tensor({1, 2, 4, 3}, rng), true);
  Var k(random_tensor({1, 2, 2, 3}, rng), true);
  Var v(random_tensor({1, 2, 2, 3}, rng), true);
  AttentionMask mask;
  mask.causal = true;
  Tensor w;
  Var out = attention(q, k, v, 1, mask, &w);
  backward(sum(out));
  REQUIRE(all_finite(out.value()));
  REQUIRE(all_finite(q.grad()));
  REQUIRE(all_finite(k.grad()));
  for (int64_t hh = 0; hh < 2; ++hh)
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) REQUIRE(w[(hh * 4 + i) * 2 + j] == 0);
      for (int64_t c = 0; c < 3; ++c) {
        REQUIRE(out.value()[(hh * 4 + i) * 3 + c] == 0);
        REQUIRE(q.grad()[(hh * 4 + i) * 3 + c] == 0);
      }
    }
}

TEST_CASE("attention shape errors name the offending shapes", "[fused][attention]") {
  Var q(Tensor({2, 3, 4, 5})), k(Tensor({2, 3, 6, 5})), v(Tensor({2, 3, 6, 7}));
  REQUIRE_NOTHROW(attention(q, k, v, 1));
  REQUIRE_THROWS_WITH(attention(q, Var(Tensor({2, 3, 6, 4})), v, 1),
                      Catch::Contains("d_k") && Catch::Contains("(2, 3, 4, 5)") && Catch::Contains("(2, 3, 6, 4)"));
  REQUIRE_THROWS_WITH(attention(q, k, Var(Tensor({2, 3, 5, 7})), 1),
                      Catch::Contains("T_k") && Catch::Contains("(2, 3, 5, 7)"));
  REQUIRE_THROWS_AS(attention(q, Var(Tensor({2, 2, 6, 5})), Var(Tensor({2, 2, 6, 7})), 1), ShapeError);
  REQUIRE_THROWS_AS(attention(q, Var(Tensor({1, 3, 6, 5})), Var(Tensor({1, 3, 6, 7})), 1), ShapeError);
  REQUIRE_THROWS_AS(attention(Var(Tensor({3, 4, 5})), k, v, 1), ShapeError);
  Tensor pad({2, 4});
  AttentionMask mask;
  mask.key_padding = &pad;
  REQUIRE_THROWS_WITH(attention(q, k, v, 1, mask), Catch::Contains("key_padding") && Catch::Contains("(2, 6)") &&
                                                       Catch::Contains("(2, 4)"));
}

TEST_CASE("attention_heads refuses q, k or v that is not 3-d, each in turn, and names the shapes",
          "[fused][attention]") {
  const Shape good{2, 5, 8};  // (B, T, h*d) with 2 heads of 4
  for (int wrong = 0; wrong < 3; ++wrong)
    for (const Shape& bad : {Shape{2, 5, 2, 4}, Shape{10, 8}}) {
      INFO("input " << wrong << " of shape " << shape_str(bad));
      Var q(Tensor(wrong == 0 ? bad : good)), k(Tensor(wrong == 1 ? bad : good)), v(Tensor(wrong == 2 ? bad : good));
      REQUIRE_THROWS_WITH(attention_heads(q, k, v, 2, 1),
                          Catch::Contains("must be 3-d") && Catch::Contains(shape_str(bad)));
    }
  REQUIRE_NOTHROW(attention_heads(Var(Tensor(good)), Var(Tensor(good)), Var(Tensor(good)), 2, 1));
}

TEST_CASE("multi-threaded attention equals attention on each (batch, head) pair alone", "[fused][attention]") {
  // B * h = 64 pairs is above the parallel threshold; a single pair runs
  // serially through the same per-pair code, so the results must be bitwise
  // equal, forward and backward.
  Rng rng(5);
  const int64_t B = 16, h = 4, T = 24, d = 16;
  Tensor qt = random_tensor({B, h, T, d}, rng), kt = random_tensor({B, h, T, d}, rng),
         vt = random_tensor({B, h, T, d}, rng), gt = random_tensor({B, h, T, d}, rng);
  AttentionMask mask;
  mask.causal = true;
  Var q(qt, true), k(kt, true), v(vt, true);
  Var out = attention(q, k, v, 0.25f, mask);
  backward(sum(mul(out, Var(gt))));
  const int64_t pair = T * d;
  int64_t mismatches = 0;
  for (int64_t bh = 0; bh < B * h; ++bh) {
    auto slice = [&](const Tensor& t) {
      Tensor s({1, 1, T, d});
      std::copy(t.data() + bh * pair, t.data() + (bh + 1) * pair, s.data());
      return s;
    };
    Var qb(slice(qt), true), kb(slice(kt), true), vb(slice(vt), true);
    Var ob = attention(qb, kb, vb, 0.25f, mask);
    backward(sum(mul(ob, Var(slice(gt)))));
    for (int64_t i = 0; i < pair; ++i) {
      mismatches += ob.value()[i] != out.value()[bh * pair + i];
      mismatches += qb.grad()[i] != q.grad()[bh * pair + i];
      mismatches += kb.grad()[i] != k.grad()[bh * pair + i];
      mismatches += vb.grad()[i] != v.grad()[bh * pair + i];
    }
  }
  REQUIRE(mismatches == 0);
}

TEST_CASE("attention hands out the same weights with and without gradient recording", "[fused][attention]") {
  Rng rng(6);
  Var q(random_tensor({2, 2, 3, 4}, rng), true), k(random_tensor({2, 2, 5, 4}, rng), true),
      v(random_tensor({2, 2, 5, 3}, rng), true);
  Tensor recorded, unrecorded;
  Var a = attention(q, k, v, 0.5f, {}, &recorded);
  {
    NoGradGuard guard;
    attention(q, k, v, 0.5f, {}, &unrecorded);
  }
  REQUIRE(recorded.shape() == unrecorded.shape());
  for (int64_t i = 0; i < recorded.numel(); ++i) REQUIRE(recorded[i] == unrecorded[i]);
  backward(sum(a));  // backward still has its own copy of the weights
  REQUIRE(all_finite(q.grad()));
}

TEST_CASE("linear's bias gradient is each column summed row after row, the same bits at one and two threads",
          "[fused][linear]") {
  // 1024 x 72 is above the parallel threshold: the columns are split between the
  // threads on multiples of 16 (0-31 and 32-71 at two), each column still summed in row order.
  Rng rng(5);
  const int64_t rows = 1024, in = 8, out = 72;
  Tensor x = random_tensor({rows, in}, rng), w = random_tensor({out, in}, rng), b = random_tensor({out}, rng);
  Tensor g = random_tensor({rows, out}, rng);
  const int saved = omp_get_max_threads();
  std::vector<Tensor> grads;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    Var xv(x, true), wv(w, true), bv(b, true);
    Var y = linear(xv, wv, bv);
    backward(sum(mul(y, Var(g))));
    grads.push_back(bv.grad());
  }
  omp_set_num_threads(saved);
  REQUIRE(grads[0].numel() == out);
  for (int64_t j = 0; j < out; ++j) {
    Real want = 0;  // the serial order: row 0, 1, 2, ...
    for (int64_t r = 0; r < rows; ++r) want += g[r * out + j];
    INFO("column " << j);
    REQUIRE(grads[0][j] == want);
    REQUIRE(grads[1][j] == want);
  }
}

TEST_CASE("linear_relu masks the upstream gradient in place unless the output keeps its gradient (retain_grad): "
          "a kept one stays unmasked, and the inputs get the composed ops' gradients either way",
          "[fused][linear]") {
  Rng rng(7);
  const int64_t rows = 64, in = 8, out = 24;
  Tensor x = random_tensor({rows, in}, rng), w = random_tensor({out, in}, rng), b = random_tensor({out}, rng);
  Tensor g = random_tensor({rows, out}, rng);
  const auto same_bits = [](const Tensor& a, const Tensor& c) {
    REQUIRE(a.numel() == c.numel());
    for (int64_t i = 0; i < a.numel(); ++i) REQUIRE(a[i] == c[i]);
  };
  Var cx(x, true), cw(w, true), cb(b, true);  // the composed ops: relu's backward masks a copy
  backward(sum(mul(relu(linear(cx, cw, cb)), Var(g))));
  for (bool keep : {false, true}) {
    INFO("retain_grad " << keep);
    Var xv(x, true), wv(w, true), bv(b, true);
    Var y = linear_relu(xv, wv, bv);
    if (keep) y.retain_grad();
    backward(sum(mul(y, Var(g))));
    if (keep) {
      REQUIRE(y.has_grad());
      same_bits(y.grad(), g);  // dL/dy, not masked
      int64_t zeros = 0;
      for (int64_t i = 0; i < y.numel(); ++i) zeros += y.value()[i] == Real(0);
      REQUIRE(zeros > 0);  // the mask has entries to hide
    }
    same_bits(xv.grad(), cx.grad());
    same_bits(wv.grad(), cw.grad());
    same_bits(bv.grad(), cb.grad());
  }
}
