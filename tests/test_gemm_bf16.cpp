// Precision bf16 of the matrix products (framework/ops/gemm.h): operands
// rounded to bfloat16 (nearest, ties to even), sums in fp32.
//
// Tolerance: a bf16 x bf16 product has at most 16 significant bits, so it is
// exact in fp32; what remains is the fp32 sum of k terms (and the alpha scale
// and the add to C), at most about (k + 2)·eps·(|alpha| Σ|a_i b_i| + |c_old|)
// with eps = 2^-23 (test_gemm.cpp's bound, the same factor 2 of room). The
// reference is the product of the bf16-rounded operands in double. Unrounded
// operands (or truncated ones) miss it by about 2^-9 of Σ|a_i b_i| / sqrt(k),
// tens of times that bound for the sizes here, which the second test checks.
// On a CPU without native bf16 the products are emulated (allow_emulated_bf16),
// and the same checks hold.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "framework/memory_pool.h"
#include "framework/ops/gemm.h"
#include "framework/ops/ops.h"
#include "framework/random.h"
#include "tests/gemm_operands.h"

using namespace attnlab;

namespace {

constexpr double kEps = std::numeric_limits<float>::epsilon();

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// bf16 for the scope of a test, native where the CPU has it, emulated elsewhere.
struct AllowEmulation {
  AllowEmulation() { detail::allow_emulated_bf16(!bf16_products_native()); }
  ~AllowEmulation() { detail::allow_emulated_bf16(false); }
};
struct Bf16Scope {
  AllowEmulation allow;
  GemmPrecisionScope scope{Precision::bf16};
};

using Case = testing::GemmCase;
using testing::Operands;
using testing::Stored;

// The largest |C - reference| over the fp32 bound, the reference being the
// double product of the operands rounded to bf16 (rounded) or as they are.
double worst_over_bound(const Case& t, const Operands& x, const std::vector<float>& c_old, float alpha, bool accumulate,
                        bool rounded) {
  const auto value = [rounded](float v) { return double(rounded ? detail::round_to_bf16(v) : v); };
  double worst = 0;
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < t.n; ++j) {
      const testing::ExpectedElement e = testing::expected_element(t, x, c_old, alpha, accumulate, i, j, value);
      const double got = x.c.v[size_t(i * x.c.ld + j)];
      worst = std::max(worst, std::abs(got - e.value) / e.bound);
      if (!std::isfinite(got)) worst = std::numeric_limits<double>::infinity();
    }
  return worst;
}

// Every transpose pair, padded rows, overwrite and accumulate, alpha 1 and 0.5,
// sizes split by rows, by columns, and at 32³ (the smallest that goes to bf16).
const std::vector<Case> kShapes = {{32, 32, 32}, {130, 97, 67}, {17, 300, 129}, {64, 200, 48}, {256, 128, 256}};

template <class Product>
void check_every_case(Product product, const char* path) {
  Rng rng(21);
  for (Case t : kShapes)
    for (int trans = 0; trans < 4; ++trans)
      for (bool accumulate : {false, true}) {
        t.ta = trans & 1;
        t.tb = trans & 2;
        t.pad = accumulate ? 3 : 0;
        Operands x(t, rng);
        const std::vector<float> c_old = x.c.v;
        const float alpha = accumulate ? 0.5f : 1.0f;
        INFO(path << ": m " << t.m << " n " << t.n << " k " << t.k << " ta " << t.ta << " tb " << t.tb << " accumulate "
                  << accumulate);
        product(x.out(), x.a.op(t.ta), x.b.op(t.tb), alpha, accumulate);
        CHECK(worst_over_bound(t, x, c_old, alpha, accumulate, true) <= 1.0);
        for (int64_t i = 0; i < t.m; ++i)  // the padding is not written
          for (int64_t j = t.n; j < x.c.ld; ++j) REQUIRE(x.c.v[size_t(i * x.c.ld + j)] == c_old[size_t(i * x.c.ld + j)]);
      }
}

}  // namespace

TEST_CASE("round_to_bf16 rounds to the nearest bfloat16, ties to even, and keeps Inf and NaN", "[gemm][bf16]") {
  CHECK(detail::round_to_bf16(1.0f) == 1.0f);
  CHECK(detail::round_to_bf16(-0.0f) == 0.0f);
  CHECK(std::signbit(detail::round_to_bf16(-0.0f)));
  // Around 1: bf16 has 7 fraction bits, so neighbours are 2^-7 apart and a tie is 2^-8 above one.
  CHECK(detail::round_to_bf16(1.0f + 0x1p-8f) == 1.0f);                      // tie: down to the even 1
  CHECK(detail::round_to_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);        // tie: up to the even 1 + 2^-6
  CHECK(detail::round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);  // above the tie: up
  CHECK(detail::round_to_bf16(1.0f + 0x1p-8f - 0x1p-20f) == 1.0f);            // below it: down (truncation would too)
  CHECK(detail::round_to_bf16(1.0f + 0x1p-7f - 0x1p-20f) == 1.0f + 0x1p-7f);  // truncation would give 1
  CHECK(detail::round_to_bf16(-(1.0f + 3 * 0x1p-8f)) == -(1.0f + 0x1p-6f));
  CHECK((bits(detail::round_to_bf16(3.14159f)) & 0xffffu) == 0);
  CHECK(std::isinf(detail::round_to_bf16(std::numeric_limits<float>::infinity())));
  CHECK(std::isinf(detail::round_to_bf16(std::numeric_limits<float>::max())));  // rounds past bf16's largest
  CHECK(std::isnan(detail::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(detail::round_to_bf16(from_bits(0x7f800001u))));  // a NaN whose payload is in the low bits
}

TEST_CASE("a bf16 gemm equals the product of the bf16-rounded operands to fp32 summation, every transpose, "
          "strides, alpha and accumulate, natively and emulated", "[gemm][bf16]") {
  INFO("bf16 native here: " << bf16_products_native());
  {
    Bf16Scope bf16;
    check_every_case(gemm, "gemm");
  }
  check_every_case(detail::bf16_emulated_gemm, "emulated");
}

TEST_CASE("bf16 products differ from fp32's by bf16's rounding: far above fp32 summation, within 2^-8 of the terms",
          "[gemm][bf16]") {
  Rng rng(22);
  const Case t{128, 96, 64};
  Operands x(t, rng);
  const std::vector<float> c_old = x.c.v;
  {
    Bf16Scope bf16;
    gemm(x.out(), x.a.op(false), x.b.op(false), 1, false);
  }
  // Against the unrounded operands the error is bf16's, tens of times fp32's bound (the operands were rounded) ...
  CHECK(worst_over_bound(t, x, c_old, 1, false, false) > 20);
  // ... and within it: each operand moved by at most 2^-9 of itself, so a term by at most about 2^-8 of itself.
  double worst = 0;
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        sum += double(x.a.at(i, p, false)) * double(x.b.at(p, j, false));
        mag += std::abs(double(x.a.at(i, p, false)) * double(x.b.at(p, j, false)));
      }
      worst = std::max(worst, std::abs(x.c.v[size_t(i * t.n + j)] - sum) / ((0x1p-8 + 0x1p-16 + (t.k + 2) * kEps) * mag));
    }
  CHECK(worst <= 1.0);
  // fp32 itself stays within fp32's bound of the unrounded product.
  gemm(x.out(), x.a.op(false), x.b.op(false), 1, false);
  CHECK(worst_over_bound(t, x, c_old, 1, false, false) <= 1.0);
}

TEST_CASE("bf16 gemm_batched: per-product operands and one C summed over the products in order", "[gemm][bf16]") {
  Rng rng(23);
  const int64_t count = 3, m = 48, n = 40, k = 64;
  Stored a(count * m, k, 0, rng), b(count * k, n, 0, rng), c(count * m, n, 0, rng), one(m, n, 0, rng);
  Bf16Scope bf16;
  gemm_batched(count, {c.v.data(), m, n, n}, m * n, {a.v.data(), m, k, k}, m * k, {b.v.data(), k, n, n}, k * n, 1, false);
  gemm_batched(count, {one.v.data(), m, n, n}, 0, {a.v.data(), m, k, k}, m * k, {b.v.data(), k, n, n}, k * n, 1, false);
  double worst_each = 0, worst_sum = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double total = 0, total_mag = 0;
      for (int64_t q = 0; q < count; ++q) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double term = double(detail::round_to_bf16(a.v[size_t((q * m + i) * k + p)])) *
                              double(detail::round_to_bf16(b.v[size_t((q * k + p) * n + j)]));
          sum += term;
          mag += std::abs(term);
        }
        const double bound = 2.0 * (k + 2) * kEps * mag;
        worst_each = std::max(worst_each, std::abs(c.v[size_t((q * m + i) * n + j)] - sum) / bound);
        total += sum;
        total_mag += mag;
      }
      worst_sum = std::max(worst_sum, std::abs(one.v[size_t(i * n + j)] - total) / (2.0 * (count * k + 2) * kEps * total_mag));
    }
  CHECK(worst_each <= 1.0);
  CHECK(worst_sum <= 1.0);
}

TEST_CASE("under bf16, products below 32³ multiply-adds stay fp32, bit for bit", "[gemm][bf16]") {
  Rng rng(24);
  for (const Case& t : {Case{16, 16, 16}, Case{32, 16, 32}, Case{20, 24, 40}}) {  // the small kernel; Eigen
    Operands x(t, rng);
    std::vector<float> fp32(size_t(t.m * t.n));
    gemm({fp32.data(), t.m, t.n, t.n}, x.a.op(false), x.b.op(false), 1, false);
    Bf16Scope bf16;
    gemm(x.out(), x.a.op(false), x.b.op(false), 1, false);
    CHECK(x.c.v == fp32);
  }
}

TEST_CASE("a bf16 gemm gives the same bits for the same inputs, one block or split across threads", "[gemm][bf16]") {
  Rng rng(25);
  Case t{512, 256, 128};
  t.tb = true;  // B stored (n, k), read transposed
  Operands x(t, rng);
  Bf16Scope bf16;
  gemm(x.out(), x.a.op(false), x.b.op(true), 1, false);
  const std::vector<float> first = x.c.v;
  for (int repeat = 0; repeat < 2; ++repeat) {
    gemm(x.out(), x.a.op(false), x.b.op(true), 1, false);
    CHECK(x.c.v == first);
  }
}

TEST_CASE("a Bf16Copy holds the stored matrix rounded as the products round it, contiguous, and a product reading it "
          "(or a copy of the padded rows read through their stride, as attention reads a head) gives the bits of "
          "rounding the operand itself: every transpose, accumulate, natively and emulated",
          "[gemm][bf16]") {
  Rng rng(26);
  const std::string built = gemm_backend();
  for (const char* backend : {built.c_str(), "eigen"})  // eigen: the emulated products, whatever the CPU
  for (Case t : kShapes)
    for (int trans = 0; trans < 4; ++trans)
      for (bool accumulate : {false, true}) {
        t.ta = trans & 1;
        t.tb = trans & 2;
        t.pad = 3;
        Operands x(t, rng);
        INFO(backend << ": m " << t.m << " n " << t.n << " k " << t.k << " ta " << t.ta << " tb " << t.tb
                     << " accumulate " << accumulate);
        set_gemm_backend(backend);
        Bf16Scope bf16;
        const Bf16Copy a_copy(x.a.op(t.ta)), b_copy(x.b.op(t.tb));
        const auto padded = [](GemmOperand o) { return GemmOperand{o.data, o.rows, o.ld, o.ld}; };
        const Bf16Copy a_wide(padded(x.a.op(t.ta))), b_wide(padded(x.b.op(t.tb)));
        for (int64_t i = 0; i < x.a.rows; ++i)
          for (int64_t j = 0; j < x.a.cols; ++j)
            REQUIRE(a_copy.data()[i * x.a.cols + j] == bits(detail::round_to_bf16(x.a.at(i, j, false))) >> 16);
        const std::vector<float> c_old = x.c.v;
        gemm(x.out(), x.a.op(t.ta), x.b.op(t.tb), 0.5f, accumulate);
        const std::vector<float> rounding_itself = x.c.v;
        for (int copies = 1; copies < 16; ++copies) {  // A's copy, B's, both; contiguous or padded (bits 4, 8)
          if ((copies & 4 && !(copies & 1)) || (copies & 8 && !(copies & 2))) continue;
          INFO("copies " << copies);
          x.c.v = c_old;
          GemmOperand a = x.a.op(t.ta), b = x.b.op(t.tb);
          REQUIRE(a.ld > a.cols);
          if (copies & 1) a.bf16 = copies & 4 ? a_wide.data() : a_copy.data(), a.bf16_ld = copies & 4 ? a.ld : 0;
          if (copies & 2) b.bf16 = copies & 8 ? b_wide.data() : b_copy.data(), b.bf16_ld = copies & 8 ? b.ld : 0;
          gemm(x.out(), a, b, 0.5f, accumulate);
          CHECK(x.c.v == rounding_itself);
        }
      }
  set_gemm_backend(built);
}

TEST_CASE("under bf16, linear and linear_relu (which round x and W once for forward and backward) give the bits "
          "of matmul, add and relu: output and every gradient", "[gemm][bf16][linear]") {
  Rng rng(27);
  const int64_t rows = 64, in = 96, out = 80;  // every product of forward and backward goes to bf16
  REQUIRE(gemm_in_bf16(rows, out, in) == false);  // fp32 until the scope below
  const auto tensor = [&rng](Shape shape) {
    Tensor t = Tensor::uninitialized(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(-1, 1));
    return t;
  };
  const Tensor x = tensor({2, rows / 2, in}), w = tensor({out, in}), b = tensor({out}), g = tensor({2, rows / 2, out});
  Bf16Scope bf16;
  REQUIRE(gemm_in_bf16(rows, out, in));
  REQUIRE(gemm_in_bf16(rows, in, out));
  REQUIRE(gemm_in_bf16(out, in, rows));
  for (bool with_relu : {false, true})
    for (bool x_needs_grad : {true, false}) {  // a constant x: dW and db only
      INFO("relu " << with_relu << ", x needs its gradient " << x_needs_grad);
      std::vector<Tensor> fused, composed;
      for (bool compose : {false, true}) {
        Var xv(x, x_needs_grad), wv(w, true), bv(b, true);
        Var y = compose ? add(matmul(xv, wv, false, true), bv) : with_relu ? linear_relu(xv, wv, bv) : linear(xv, wv, bv);
        if (compose && with_relu) y = relu(y);
        backward(sum(mul(y, Var(g))));
        REQUIRE(xv.has_grad() == x_needs_grad);
        (compose ? composed : fused) = {y.value(), wv.grad(), bv.grad()};
        if (x_needs_grad) (compose ? composed : fused).push_back(xv.grad());
      }
      const char* names[] = {"output", "dW", "db", "dx"};
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO(names[i]);
        REQUIRE(fused[i].shape() == composed[i].shape());
        for (int64_t e = 0; e < fused[i].numel(); ++e) REQUIRE(fused[i][e] == composed[i][e]);
      }
    }
}

TEST_CASE("linear and linear_relu free what their backward does not read once the forward is done with it: "
          "their output, and under bf16 the fp32 x (read as its bf16 copy) and the ReLU's output (kept as bits "
          "y > 0), and backward gives the bits of matmul, add and relu with every value kept",
          "[gemm][bf16][linear][memory]") {
  Rng rng(41);
  const int64_t in = 96, out = 83;  // 83 columns: the masks' sixteen-at-a-time path and its tail
  const auto tensor = [&rng](Shape shape) {
    Tensor t = Tensor::uninitialized(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(-1, 1));
    return t;
  };
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(2);  // 999 rows x 83: the backward's two chunks split a row, mid-byte
  for (int64_t rows : {64, 999})
    for (bool bf16 : {false, true})
      for (bool with_relu : {false, true}) {
        INFO(rows << " rows, bf16 " << bf16 << ", relu " << with_relu);
        const Tensor x = tensor({rows, in}), w = tensor({out, in}), b = tensor({out}), c = tensor({rows, out}),
                     g = tensor({rows, out});
        AllowEmulation allow;
        GemmPrecisionScope scope(bf16 ? Precision::bf16 : Precision::fp32);
        std::vector<Tensor> kept, freed;
        for (bool keep : {true, false}) {
          Var xv(x, true), wv(w, true), bv(b, true), zero(Tensor({rows, in}));
          Var x1, lin;  // held only by the reference: x + 0 (not a leaf) and the layer's output
          const auto layer = [&](const Var& in_x) { return with_relu ? linear_relu(in_x, wv, bv) : linear(in_x, wv, bv); };
          Var s;  // add reads no value: nothing but the Vars above holds x + 0 and the layer's output
          if (keep) {  // the reference: matmul, add and relu, every value held
            x1 = add(xv, zero);
            lin = add(matmul(x1, wv, false, true), bv);
            if (with_relu) lin = relu(lin);
            s = add(lin, Var(c));
          } else {
            s = add(layer(add(xv, zero)), Var(c));
          }
          const Node* lin_node = s.node()->inputs[0].get();
          const Node* x1_node = keep ? x1.node() : lin_node->inputs[0].get();
          CHECK(lin_node->value.numel() == (keep || (with_relu && !bf16) ? rows * out : 0));
          CHECK(x1_node->value.numel() == (keep || !bf16 ? rows * in : 0));
          CHECK(lin_node->value.shape() == Shape{rows, out});
          CHECK(x1_node->value.shape() == Shape{rows, in});
          backward(sum(mul(s, Var(g))));
          (keep ? kept : freed) = {s.value(), xv.grad(), wv.grad(), bv.grad()};
        }
        const char* names[] = {"output", "dx", "dW", "db"};
        for (size_t i = 0; i < kept.size(); ++i) {
          INFO(names[i]);
          REQUIRE(kept[i].numel() == freed[i].numel());
          for (int64_t e = 0; e < kept[i].numel(); ++e) REQUIRE(kept[i][e] == freed[i][e]);
        }
      }
  omp_set_num_threads(saved_threads);
}

// Tolerance: inputs in [-1, 1], d = 32, scale 32^-1/2. Rounding both operands
// of a product to bf16 moves each term by at most 2^-8 of its size, so a score
// by at most 2^-8 · 32 · scale < 0.023, the weights P by a factor within
// e^(±0.045) (a softmax moves by at most twice its inputs' largest change), and
// an output (a mean of v's rows under P) by less than 0.05 + 2^-8. The gradients
// are sums of as many terms of the same sizes; 0.1 holds them with room. A head
// read at another head's columns misses by the size of the values themselves.
TEST_CASE("under bf16, attention rounds q, k and v once for its six products: output and gradients within bf16's "
          "rounding of fp32's, the fp32 inputs freed once the forward is done with them, and freeing them changes "
          "no bit",
          "[gemm][bf16][attention][memory]") {
  Rng rng(43);
  const int64_t B = 2, T = 32, h = 2, d = 32;  // T·T·d = 32³: every product of the heads runs in bf16
  const Real scale = static_cast<Real>(1 / std::sqrt(double(d)));
  const auto tensor = [&rng](Shape shape) {
    Tensor t = Tensor::uninitialized(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(-1, 1));
    return t;
  };
  for (bool packed : {true, false}) {
    const int64_t width = packed ? 3 * h * d : h * d;
    const size_t count = packed ? 1 : 3;
    std::vector<Tensor> x;
    for (size_t i = 0; i < count; ++i) x.push_back(tensor({B, T, width}));
    const Tensor g = tensor({B, T, h * d});
    std::vector<Tensor> results[3];  // fp32; bf16 with the inputs held; bf16 with them freed
    for (int run = 0; run < 3; ++run) {
      const bool bf16 = run > 0, hold = run == 1;
      INFO((packed ? "attention_packed" : "attention_heads") << ", run " << run);
      AllowEmulation allow;
      GemmPrecisionScope scope(bf16 ? Precision::bf16 : Precision::fp32);
      std::vector<Var> leaves, held;
      for (const Tensor& t : x) leaves.emplace_back(t, true);
      const auto input = [&](size_t i) {  // x + 0: not a leaf, so it can be freed
        Var v = add(leaves[i], Var(Tensor(x[i].shape())));
        if (hold) held.push_back(v);
        return v;
      };
      const AttentionMask causal{true};
      Var out = packed ? attention_packed(input(0), h, d, d, scale, causal)
                       : attention_heads(input(0), input(1), input(2), h, scale, causal);
      for (size_t i = 0; i < count; ++i)
        CHECK(out.node()->inputs[i]->value.numel() == (bf16 && !hold ? 0 : B * T * width));
      backward(sum(mul(out, Var(g))));
      results[run] = {out.value()};
      for (const Var& l : leaves) results[run].push_back(l.grad());
    }
    for (size_t i = 0; i < results[0].size(); ++i) {
      INFO((packed ? "attention_packed" : "attention_heads") << (i == 0 ? ": output" : ": gradient"));
      double largest = 0;
      for (int64_t e = 0; e < results[0][i].numel(); ++e) {
        REQUIRE(results[1][i][e] == results[2][i][e]);
        largest = std::max(largest, std::abs(double(results[1][i][e]) - results[0][i][e]));
      }
      CHECK(largest > 0);  // bf16 did round
      CHECK(largest < (i == 0 ? 0.05 + 1.0 / 256 : 0.1));
    }
  }
}

#if !defined(__SANITIZE_ADDRESS__)  // the buffer cache is bypassed under AddressSanitizer: no such test there
TEST_CASE("a Bf16Copy takes its buffer from the buffer cache and gives back exactly its size", "[gemm][bf16][memory]") {
  Rng rng(28);
  Stored matrix(128, 77, 5, rng);  // 128 x 77 values: 19,712 bytes in bf16 (whole 64-byte blocks), a size no other test allocates
  const std::size_t bytes = 128 * 77 * sizeof(uint16_t);
  { const Bf16Copy first(matrix.op(false)); }
  const memory::PoolStats before = memory::stats();
  {
    const Bf16Copy again(matrix.op(false));
    CHECK(memory::stats().fresh == before.fresh);
    CHECK(memory::stats().reused == before.reused + 1);
    CHECK(memory::stats().cached_bytes == before.cached_bytes - bytes);
  }
  CHECK(memory::stats().cached_bytes == before.cached_bytes);
  Bf16Copy moved(matrix.op(false));  // takes the cached block
  const uint16_t* data = moved.data();
  Bf16Copy target(matrix.op(false));  // a fresh one
  CHECK(memory::stats().cached_bytes == before.cached_bytes - bytes);
  target = std::move(moved);  // target's own block goes back to the cache, moved's buffer moves
  CHECK(target.data() == data);
  CHECK(moved.data() == nullptr);
  CHECK(memory::stats().cached_bytes == before.cached_bytes);
}
#endif

TEST_CASE("bf16 is refused, naming the kernel, where products have no native bf16: the Eigen backend", "[gemm][bf16]") {
  const std::string built = gemm_backend();
  set_gemm_backend("eigen");
  CHECK_THROWS_WITH(set_gemm_precision(Precision::bf16),
                    Catch::StartsWith("precision bf16 is not available: ") && Catch::Contains("eigen"));
  CHECK_THROWS_WITH(check_gemm_precision(Precision::bf16, "--precision"), Catch::StartsWith("--precision bf16 is not"));
  CHECK(gemm_precision() == Precision::fp32);
  set_gemm_backend(built);
  if (bf16_products_native()) {
    GemmPrecisionScope scope(Precision::bf16);
    CHECK(gemm_precision() == Precision::bf16);
  }
  CHECK(gemm_precision() == Precision::fp32);  // the scope restored it
}
