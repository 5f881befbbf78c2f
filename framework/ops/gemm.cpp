// The matrix-product backends behind gemm() (see gemm.h): Eigen everywhere,
// oneDNN's sgemm for float32 when the build selected it (ATTNLAB_GEMM_ONEDNN),
// and the choice of precision (the bf16 products are in gemm_bf16.cpp).
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_pd, GCC bug 105593) when Eigen vectorises; silence it here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "framework/ops/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "framework/ops/broadcast.h"
#include "framework/ops/gemm_bf16.h"
#include "framework/ops/gemm_log.h"
#include "framework/ops/gemm_small.h"

#ifdef ATTNLAB_USE_ONEDNN
#include <dnnl.h>
#endif

namespace attnlab {
namespace {

using Strided = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;
using ConstStrided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

ConstStrided map(const GemmOperand& o) { return ConstStrided(o.data, o.rows, o.cols, Eigen::OuterStride<>(o.ld)); }

}  // namespace

// Eigen threads a large product itself (splitting the output into blocks, a
// fixed split for a given thread count) and runs on one thread inside a region.
void detail::eigen_gemm(const GemmOutput& out, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate) {
  Strided c(out.data, out.rows, out.cols, Eigen::OuterStride<>(out.ld));
  const ConstStrided x = map(a), y = map(b);
  if (accumulate) {
    if (!a.trans && !b.trans) c.noalias() += alpha * x * y;
    else if (!a.trans) c.noalias() += alpha * x * y.transpose();
    else if (!b.trans) c.noalias() += alpha * x.transpose() * y;
    else c.noalias() += alpha * x.transpose() * y.transpose();
  } else {
    if (!a.trans && !b.trans) c.noalias() = alpha * x * y;
    else if (!a.trans) c.noalias() = alpha * x * y.transpose();
    else if (!b.trans) c.noalias() = alpha * x.transpose() * y;
    else c.noalias() = alpha * x.transpose() * y.transpose();
  }
}

namespace {

bool g_eigen_only = false;  // set_gemm_backend("eigen") in a build with a library backend
Precision g_precision = Precision::fp32;
bool g_allow_emulated_bf16 = false;

#ifdef ATTNLAB_USE_ONEDNN
// One block on the calling thread (oneDNN runs single-threaded inside an OpenMP
// region, and with one OpenMP thread outside one).
void onednn_block(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate) {
  const dnnl_status_t s = dnnl_sgemm(a.trans ? 'T' : 'N', b.trans ? 'T' : 'N', c.rows, c.cols, a.op_cols(), alpha,
                                     a.data, a.ld, b.data, b.ld, accumulate ? 1.0f : 0.0f, c.data, c.ld);
  if (s != dnnl_success) throw std::runtime_error("gemm: dnnl_sgemm failed with status " + std::to_string(s));
}

// Below this many multiply-adds per thread a product stays on one thread.
constexpr int64_t kMinWorkPerThread = int64_t{1} << 18;

// Rows [lo, hi) of op(o) (trans: columns of the stored matrix), or its columns.
GemmOperand op_rows(GemmOperand o, int64_t lo, int64_t hi) {
  if (o.trans) o.data += lo, o.cols = hi - lo;
  else o.data += lo * o.ld, o.rows = hi - lo;
  return o;
}
GemmOperand op_cols(GemmOperand o, int64_t lo, int64_t hi) {
  if (o.trans) o.data += lo * o.ld, o.rows = hi - lo;
  else o.data += lo, o.cols = hi - lo;
  return o;
}

}  // namespace

void detail::for_each_block(int64_t rows, int64_t cols, int64_t k,
                            const std::function<void(int64_t, int64_t, bool)>& block) {
  const int64_t work = rows * cols * k;
  const int64_t most = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool by_rows = rows >= cols;
  const int64_t extent = by_rows ? rows : cols;
  const int64_t threads = std::min({most, std::max<int64_t>(1, work / kMinWorkPerThread), (extent + 15) / 16});
  if (threads <= 1) return block(0, extent, by_rows);
  const int64_t units = (extent + 15) / 16;
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(threads))
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t lo = std::min(extent, units * t / threads * 16), hi = std::min(extent, units * (t + 1) / threads * 16);
    if (lo < hi) block(lo, hi, by_rows);
  }
}

namespace {
// oneDNN's sgemm, one block per thread (detail::for_each_block).
void onednn_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate) {
  detail::for_each_block(c.rows, c.cols, a.op_cols(), [&](int64_t lo, int64_t hi, bool by_rows) {
    if (by_rows)
      onednn_block({c.data + lo * c.ld, hi - lo, c.cols, c.ld}, op_rows(a, lo, hi), b, alpha, accumulate);
    else
      onednn_block({c.data + lo, c.rows, hi - lo, c.ld}, a, op_cols(b, lo, hi), alpha, accumulate);
  });
}
#endif

}  // namespace

namespace {
// Below this size (the attention heads of S and M) a library's packing and
// dispatch cost more than the multiply-adds: such products go to the small
// kernel where their width fits it, else to Eigen (docs/performance.md), in
// every backend, and stay fp32 under bf16. The choice depends only on the
// sizes: the same every call.
bool is_small_product(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kSmallProduct = 32 * 32 * 32;
  return m * n * k < kSmallProduct;
}

// gemm() without the record: what gemm_batched() calls for each of its products.
void product(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate) {
  assert(a.op_rows() == c.rows && b.op_cols() == c.cols && a.op_cols() == b.op_rows());
  if (c.rows == 0 || c.cols == 0) return;
  if (a.op_cols() == 0) {  // an empty sum: C = 0, or C unchanged
    if (!accumulate)
      for (int64_t i = 0; i < c.rows; ++i) std::fill(c.data + i * c.ld, c.data + i * c.ld + c.cols, Real(0));
    return;
  }
  const bool small = is_small_product(c.rows, c.cols, a.op_cols());
  if (small && detail::small_gemm_fits(c.cols, a.op_cols())) return detail::small_gemm(c, a, b, alpha, accumulate);
  if (gemm_in_bf16(c.rows, c.cols, a.op_cols())) {
#ifdef ATTNLAB_USE_ONEDNN
    if (!g_eigen_only && detail::onednn_bf16_native(nullptr)) return detail::onednn_bf16_gemm(c, a, b, alpha, accumulate);
#endif
    return detail::bf16_emulated_gemm(c, a, b, alpha, accumulate);  // allowed (tests), or the backend switched since
  }
#ifdef ATTNLAB_USE_ONEDNN
  if (g_eigen_only || small) return detail::eigen_gemm(c, a, b, alpha, accumulate);
  onednn_gemm(c, a, b, alpha, accumulate);
#else
  detail::eigen_gemm(c, a, b, alpha, accumulate);
#endif
}

void record(int64_t count, const GemmOutput& c, int64_t c_stride, const GemmOperand& a, int64_t a_stride,
            const GemmOperand& b, int64_t b_stride, Real alpha, bool accumulate) {
  if (GemmLog* log = detail::active_gemm_log()) {
    GemmOperand sizes_a = a, sizes_b = b;  // a bf16 copy does not outlive the call
    sizes_a.bf16 = sizes_b.bf16 = nullptr;
    log->record({count, c, c_stride, sizes_a, sizes_b, a_stride, b_stride, alpha, accumulate, omp_in_parallel() != 0});
  }
}
}  // namespace

void gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate) {
  record(1, c, 0, a, 0, b, 0, alpha, accumulate);
  product(c, a, b, alpha, accumulate);
}

void gemm_batched(int64_t count, const GemmOutput& c, int64_t c_stride, const GemmOperand& a, int64_t a_stride,
                  const GemmOperand& b, int64_t b_stride, Real alpha, bool accumulate) {
  record(count, c, c_stride, a, a_stride, b, b_stride, alpha, accumulate);
  auto nth = [](auto o, int64_t i, int64_t stride) {
    o.data += i * stride;
    if constexpr (std::is_same_v<decltype(o), GemmOperand>) o.bf16 = nullptr;  // a copy covers one matrix
    return o;
  };
  if (c_stride == 0) {  // one C: the products are summed in order, on this thread
    for (int64_t i = 0; i < count; ++i) product(c, nth(a, i, a_stride), nth(b, i, b_stride), alpha, accumulate || i > 0);
    return;
  }
  const int64_t work = c.rows * c.cols * a.op_cols();
  const bool parallel = count > 1 && count * work >= detail::kParallelGrain * 4 && omp_get_max_threads() > 1 &&
                        !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < count; ++i)
    product(nth(c, i, c_stride), nth(a, i, a_stride), nth(b, i, b_stride), alpha, accumulate);
}

namespace {
std::string eigen_kernel() {
  return "eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + " (" + Eigen::SimdInstructionSetsInUse() + ")";
}
}  // namespace

std::string gemm_kernel() {
#ifdef ATTNLAB_USE_ONEDNN
  if (g_eigen_only) return eigen_kernel();
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "unknown ISA";
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: isa = "sse41"; break;
    case dnnl_cpu_isa_avx: isa = "avx"; break;
    case dnnl_cpu_isa_avx2: isa = "avx2"; break;
    case dnnl_cpu_isa_avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl_cpu_isa_avx512_core: isa = "avx512_core"; break;
    case dnnl_cpu_isa_avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl_cpu_isa_avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl_cpu_isa_avx512_core_amx: isa = "avx512_core_amx"; break;
    default: break;
  }
  std::string bf16;
  if (g_precision == Precision::bf16 && detail::onednn_bf16_native(&bf16)) bf16 = "; bf16 matmul " + bf16;
  return "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (" +
         isa + bf16 + ")";
#else
  return eigen_kernel();
#endif
}

const char* gemm_backend() {
#ifdef ATTNLAB_USE_ONEDNN
  return g_eigen_only ? "eigen" : "onednn";
#else
  return "eigen";
#endif
}

void set_gemm_backend(const std::string& name) {
#ifdef ATTNLAB_USE_ONEDNN
  const bool onednn_built = true;
#else
  const bool onednn_built = false;
#endif
  if (name == "eigen" || (name == "onednn" && onednn_built)) {
    g_eigen_only = name == "eigen";
    return;
  }
  if (name == "onednn")
    throw ValueError("matrix-product backend 'onednn' is not in this build (configured with ATTNLAB_GEMM=eigen, or "
                     "without libdnnl-dev); it has 'eigen'");
  throw ValueError("matrix-product backend must be eigen or onednn, got '" + name + "'");
}

bool bf16_products_native(std::string* why) {
#ifdef ATTNLAB_USE_ONEDNN
  std::string kernel;
  if (!g_eigen_only && detail::onednn_bf16_native(&kernel)) return true;
  if (why)
    *why = g_eigen_only ? "the matrix products run on " + gemm_kernel() + ", which has no bf16 product"
                        : "this CPU has no native bf16 product (AVX512_BF16 or AMX): oneDNN's kernel is " +
                              gemm_kernel() + ", its bf16 matmul " + kernel + " (emulated bf16 is slower than fp32)";
#else
  if (why)
    *why = std::string(sizeof(Real) == 8 ? "the float64 build computes in float64" : "this build's matrix products") +
           " run on " + gemm_kernel() + ", which has no bf16 product (bf16 needs oneDNN: libdnnl-dev)";
#endif
  return false;
}

const ChoiceNames<Precision>& choice_names(Precision) {
  static const ChoiceNames<Precision> names = {
      {Precision::fp32, "fp32"},
      {Precision::bf16, "bf16",
       "operands rounded to bfloat16, fp32 sums, as torch.autocast; weights, optimizer, softmax, norms and loss stay "
       "fp32; needs a CPU with AVX512_BF16 or AMX; docs/performance.md"}};
  return names;
}

Precision gemm_precision() { return g_precision; }

bool gemm_in_bf16(int64_t m, int64_t n, int64_t k) {
  return g_precision == Precision::bf16 && !is_small_product(m, n, k);
}

void check_gemm_precision(Precision p, const std::string& name) {
  std::string why;
  if (p == Precision::bf16 && !g_allow_emulated_bf16 && !bf16_products_native(&why))
    throw ValueError(name + " bf16 is not available: " + why);
}

void set_gemm_precision(Precision p) {
  check_gemm_precision(p);
  g_precision = p;
}

void detail::allow_emulated_bf16(bool allow) { g_allow_emulated_bf16 = allow; }

}  // namespace attnlab
