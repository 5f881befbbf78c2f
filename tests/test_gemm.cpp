// The matrix-product interface (framework/ops/gemm.h) in float32, on the
// backend this build selected: against a plain double-precision loop for every
// transpose combination, overwrite and accumulate, odd and strided sizes, the
// batched and shared-operand forms, and against the Eigen backend; the same
// inputs give the same bits; an overwrite never reads the destination.
//
// Tolerance: a float32 dot product of length k carries a rounding error of at
// most about k·eps·Σ|a_i b_i| (eps = 2^-24·2 per multiply-add, one rounding of
// the running sum each step; blocked or FMA kernels only do better), so each
// element is checked against 2·(k + 2)·eps·(Σ|a_i b_i| + |c_old|). A wrong
// term (a missed row, a dropped alpha, a transposed index) is of the size of a
// product, orders of magnitude above that.
#include <omp.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "framework/ops/gemm.h"
#include "framework/ops/gemm_small.h"
#include "framework/ops/ops.h"
#include "framework/tensor.h"  // Eigen, quieted for GCC 12 there
#include "framework/random.h"
#include "tests/gemm_operands.h"
#include "tests/cli_harness.h"

using namespace attnlab;

namespace {

constexpr double kEps = std::numeric_limits<float>::epsilon();

using Case = testing::GemmCase;
using testing::Operands;
using testing::Stored;

// Checks c_new = (accumulate ? c_old : 0) + alpha op(A) op(B) element by element
// against a double loop, within the bound above; padding must be untouched.
void check_against_loop(const Case& t, const Operands& x, const std::vector<float>& c_old, float alpha,
                        bool accumulate) {
  int64_t bad = 0;
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < t.n; ++j) {
      const testing::ExpectedElement e =
          testing::expected_element(t, x, c_old, alpha, accumulate, i, j, [](float v) { return double(v); });
      const double want = e.value, bound = e.bound + 1e-30;
      const double got = x.c.v[size_t(i * x.c.ld + j)];
      if (!(std::abs(got - want) <= bound)) {
        if (bad++ < 3) UNSCOPED_INFO("C(" << i << ", " << j << ") = " << got << ", want " << want << " +- " << bound);
      }
    }
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = t.n; j < x.c.ld; ++j) REQUIRE(x.c.v[size_t(i * x.c.ld + j)] == c_old[size_t(i * x.c.ld + j)]);
  CHECK(bad == 0);
}

const std::vector<Case> kShapes = {
    {1, 1, 1, false, false},  {7, 1, 33, false, false}, {1, 7, 33, false, false}, {7, 33, 1, false, false},
    {33, 7, 65, false, false}, {64, 64, 32, false, false}, {130, 97, 67, false, false},  // above the threads' grain
    {17, 300, 129, false, false},                                                        // wide: split by columns
    {33, 33, 33, false, false},  {1, 300, 129, false, false},  // just above the size that goes to Eigen
    // The small kernel (gemm_small.h): S's and M's heads, a tail of rows after the blocks of 8 and 4,
    // every width it takes, k at its limit; and k one past it (Eigen).
    {16, 16, 16, false, false}, {32, 32, 16, false, false}, {32, 16, 32, false, false}, {7, 48, 30, false, false},
    {9, 64, 20, false, false},  {13, 16, 128, false, false}, {5, 16, 129, false, false},
};

}  // namespace

TEST_CASE("gemm equals a plain loop for every transpose pair, overwrite and accumulate, odd and strided sizes",
          "[gemm]") {
  Rng rng(11);
  for (Case t : kShapes)
    for (int trans = 0; trans < 4; ++trans)
      for (int64_t pad : {0, 3})
        for (bool accumulate : {false, true}) {
          t.ta = trans & 1;
          t.tb = trans & 2;
          t.pad = pad;
          Operands x(t, rng);
          const std::vector<float> c_old = x.c.v;
          const float alpha = accumulate || pad ? 0.5f : 1.0f;  // alpha on both paths (attention scales)
          INFO("m " << t.m << " n " << t.n << " k " << t.k << " ta " << t.ta << " tb " << t.tb << " pad " << pad
                    << " accumulate " << accumulate << " backend " << gemm_backend());
          gemm(x.out(), x.a.op(t.ta), x.b.op(t.tb), alpha, accumulate);
          check_against_loop(t, x, c_old, alpha, accumulate);
          if (t.m * t.n * t.k < 32 * 32 * 32 && detail::small_gemm_fits(t.n, t.k)) {  // it went to the small kernel
            std::vector<float> small = c_old;
            detail::small_gemm({small.data(), t.m, t.n, x.c.ld}, x.a.op(t.ta), x.b.op(t.tb), alpha, accumulate);
            REQUIRE(small == x.c.v);
          }
        }
}

TEST_CASE("the small kernel takes widths 16, 32, 48 and 64 and k up to 128, nothing else", "[gemm]") {
  for (int64_t n : {16, 32, 48, 64}) CHECK(detail::small_gemm_fits(n, 128));
  for (int64_t n : {0, 8, 17, 80}) CHECK_FALSE(detail::small_gemm_fits(n, 16));
  CHECK_FALSE(detail::small_gemm_fits(16, 0));
  CHECK_FALSE(detail::small_gemm_fits(16, 129));
}

TEST_CASE("gemm agrees with the Eigen backend to rounding on the engine's shapes", "[gemm]") {
  Rng rng(12);
  // (B·T, d) x (d, d_ff)ᵀ of M, its dX and dW, and one attention head of L.
  const std::vector<Case> shapes = {{2048, 512, 128, false, true}, {2048, 128, 512, false, false},
                                    {512, 128, 2048, true, false}, {64, 64, 32, false, true}};
  for (const Case& t : shapes) {
    Operands x(t, rng);
    std::vector<float> eigen(x.c.v.size());
    gemm(x.out(), x.a.op(t.ta), x.b.op(t.tb), 1, false);
    detail::eigen_gemm({eigen.data(), t.m, t.n, t.n}, x.a.op(t.ta), x.b.op(t.tb), 1, false);
    int64_t bad = 0;
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        double mag = 0;  // Σ|a b|: each result is within (k + 2)·eps·mag of the exact sum
        for (int64_t p = 0; p < t.k; ++p) mag += std::abs(double(x.a.at(i, p, t.ta)) * double(x.b.at(p, j, t.tb)));
        const size_t e = size_t(i * t.n + j);
        if (!(std::abs(double(eigen[e]) - double(x.c.v[e])) <= 2.0 * double(t.k + 2) * kEps * mag)) ++bad;
      }
    INFO("m " << t.m << " n " << t.n << " k " << t.k << " backend " << gemm_backend());
    CHECK(bad == 0);
  }
}

TEST_CASE("gemm without accumulate never reads the destination (a NaN there does not survive)", "[gemm]") {
  Rng rng(13);
  for (const Case& t : {Case{33, 7, 65, false, true}, Case{130, 97, 67, true, false}, Case{16, 16, 16, false, true},
                        Case{7, 48, 30, true, false}}) {
    Operands x(t, rng);
    std::fill(x.c.v.begin(), x.c.v.end(), std::numeric_limits<float>::quiet_NaN());
    gemm(x.out(), x.a.op(t.ta), x.b.op(t.tb), 1, false);
    for (float v : x.c.v) REQUIRE(std::isfinite(v));
  }
}

TEST_CASE("gemm with an empty inner size writes zeros, or leaves an accumulated C as it was", "[gemm]") {
  std::vector<float> c(6, 5.0f);
  const float none = 0;
  gemm({c.data(), 2, 3, 3}, {&none, 2, 0, 0}, {&none, 0, 3, 3}, 1, true);
  for (float v : c) CHECK(v == 5.0f);
  gemm({c.data(), 2, 3, 3}, {&none, 2, 0, 0}, {&none, 0, 3, 3}, 1, false);
  for (float v : c) CHECK(v == 0.0f);
}

TEST_CASE("gemm_batched: per-batch operands, a shared B, and one C summed over the batches in order", "[gemm]") {
  Rng rng(14);
  const int64_t count = 5, m = 9, n = 13, k = 70;
  Stored a(count * m, k, 0, rng), b(count * k, n, 0, rng), shared(k, n, 0, rng);
  Stored c(count * m, n, 0, rng), one(m, n, 0, rng);
  for (bool share : {false, true}) {
    const Stored& bs = share ? shared : b;
    gemm_batched(count, {c.v.data(), m, n, n}, m * n, {a.v.data(), m, k, k}, m * k, {bs.v.data(), k, n, n},
                 share ? 0 : k * n, 1, false);
    for (int64_t i = 0; i < count; ++i) {  // batch i against its own gemm
      std::vector<float> want(size_t(m * n));
      gemm({want.data(), m, n, n}, {a.v.data() + i * m * k, m, k, k}, {bs.v.data() + (share ? 0 : i * k * n), k, n, n},
           1, false);
      for (int64_t e = 0; e < m * n; ++e) REQUIRE(c.v[size_t(i * m * n + e)] == want[size_t(e)]);
    }
  }
  // c_stride 0: C = Σ_i A_i B_i (overwrite first), then += again (accumulate).
  for (bool accumulate : {false, true}) {
    const std::vector<float> old = one.v;
    gemm_batched(count, {one.v.data(), m, n, n}, 0, {a.v.data(), m, k, k}, m * k, {b.v.data(), k, n, n}, k * n, 1,
                 accumulate);
    std::vector<float> want(size_t(m * n));
    if (accumulate) want = old;
    for (int64_t i = 0; i < count; ++i)
      gemm({want.data(), m, n, n}, {a.v.data() + i * m * k, m, k, k}, {b.v.data() + i * k * n, k, n, n}, 1,
           accumulate || i > 0);
    for (int64_t e = 0; e < m * n; ++e) REQUIRE(one.v[size_t(e)] == want[size_t(e)]);
  }
}

TEST_CASE("gemm gives the same bits for the same inputs, at one thread and at the thread count in use", "[gemm]") {
  Rng rng(15);
  const int saved = omp_get_max_threads();
  for (int threads : {1, std::max(2, saved)}) {
    omp_set_num_threads(threads);
    for (const Case& t : {Case{2048, 256, 256, false, true}, Case{256, 256, 2048, true, false},
                          Case{97, 1000, 131, false, false}}) {
      Operands x(t, rng);
      std::vector<float> first(x.c.v.size());
      gemm({first.data(), t.m, t.n, x.c.ld}, x.a.op(t.ta), x.b.op(t.tb), 1, false);
      for (int rep = 0; rep < 3; ++rep) {
        gemm(x.out(), x.a.op(t.ta), x.b.op(t.tb), 1, false);
        INFO("threads " << threads << " m " << t.m << " rep " << rep);
        REQUIRE(x.c.v == first);
      }
    }
  }
  omp_set_num_threads(saved);
}

TEST_CASE("gemm_backend names the backend CMake selected", "[gemm]") {
  CHECK(std::string(gemm_backend()) == ATTNLAB_GEMM_BACKEND_NAME);
}

TEST_CASE("set_gemm_backend switches to eigen and back, and refuses an unknown name naming it", "[gemm]") {
  const std::string built = gemm_backend();
  set_gemm_backend("eigen");
  CHECK(std::string(gemm_backend()) == "eigen");
  CHECK(gemm_kernel().rfind("eigen ", 0) == 0);
  set_gemm_backend(built);
  CHECK(std::string(gemm_backend()) == built);
  CHECK_THROWS_WITH(set_gemm_backend("blas"), Catch::Contains("got 'blas'"));
  CHECK(std::string(gemm_backend()) == built);
}

// The beta = 0 path of the ops (Node::grad_target, framework/autograd.h): a gradient that
// already holds something is added to, a fresh one is overwritten, and an
// input used twice by one op gets both contributions.
TEST_CASE("matmul and linear backward add to a gradient that holds values and fill a fresh one", "[gemm]") {
  Rng rng(16);
  auto random = [&](Shape s) {
    Tensor t(std::move(s));
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(rng.uniform(-1, 1));
    return t;
  };
  const Tensor av = random({3, 40, 50}), wv = random({60, 50}), g = random({3, 40, 60});
  auto grads = [&](bool preload, Tensor& ga, Tensor& gw) {
    Var a(av, true), w(wv, true);
    if (preload) {
      a.grad() = Tensor(av.shape(), 1.0f);
      w.grad() = Tensor(wv.shape(), 2.0f);
    }
    Var y = linear(a, w, Var());
    Var loss = sum(mul(y, Var(g)));
    backward(loss);
    ga = a.grad();
    gw = w.grad();
  };
  Tensor fresh_a, fresh_w, pre_a, pre_w;
  grads(false, fresh_a, fresh_w);
  grads(true, pre_a, pre_w);
  for (int64_t i = 0; i < fresh_a.numel(); ++i) REQUIRE(pre_a[i] == Approx(fresh_a[i] + 1.0f).margin(1e-5));
  for (int64_t i = 0; i < fresh_w.numel(); ++i) REQUIRE(pre_w[i] == Approx(fresh_w[i] + 2.0f).margin(1e-4));
  // x used as both operands of x xᵀ: d/dx sum(G ⊙ x xᵀ) = (G + Gᵀ) x.
  const Tensor xv = random({37, 45}), gx = random({37, 37});
  Var x(xv, true);
  backward(sum(mul(matmul(x, x, false, true), Var(gx))));
  for (int64_t i = 0; i < 37; ++i)
    for (int64_t j = 0; j < 45; ++j) {
      double want = 0;
      for (int64_t p = 0; p < 37; ++p) want += (double(gx[i * 37 + p]) + double(gx[p * 37 + i])) * double(xv[p * 45 + j]);
      REQUIRE(x.grad()[i * 45 + j] == Approx(want).margin(1e-4));
    }
}

TEST_CASE("bench reports the CPU, the backend, the FMA peak and an MFU below 1, and refuses an unknown --gemm",
          "[gemm][cli]") {
  auto r = attnlab::testing::run_attnlab("bench --config graph --steps 20 --warmup 2");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["gemm_backend"] == ATTNLAB_GEMM_BACKEND_NAME);
  CHECK(j["cpu"].get<std::string>().size() > 0);
  CHECK(j["fma_peak_gflops"].get<double>() > 0);
  CHECK(j["fma_lanes"].get<int>() >= 1);
#ifdef EIGEN_VECTORIZE_FMA  // the tests are built with the library's -march: the loop's vectors fuse when these do
  CHECK(j["fma_fused"] == true);
#else
  CHECK(j["fma_fused"] == false);
#endif
  CHECK(j["mfu"].get<double>() > 0);
  CHECK(j["mfu"].get<double>() <= 1);
  CHECK(j["mfu"].get<double>() == Approx(j["gflops"].get<double>() / j["fma_peak_gflops"].get<double>()));
  CHECK(j["gemm_mfu"].get<double>() == Approx(j["gflops"].get<double>() / j["gemm_peak_gflops"].get<double>()));
  auto e = attnlab::testing::run_attnlab("bench --config graph --steps 2 --warmup 0 --no-peak --gemm eigen");
  CHECK(e.code == 0);
  auto bad = attnlab::testing::run_attnlab("bench --config graph --gemm blas");
  INFO(bad.out);
  CHECK(bad.code != 0);
  CHECK(bad.out.find("--gemm") != std::string::npos);
  CHECK(bad.out.find("'blas'") != std::string::npos);
  CHECK(std::count(bad.out.begin(), bad.out.end(), '\n') == 1);
}
