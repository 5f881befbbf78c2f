#pragma once
// The engine's one matrix-product interface. Every product of the engine's ops
// goes through gemm() or gemm_batched(), so the kernel behind them is chosen in
// one place (framework/ops/gemm.cpp):
//   "eigen"  Eigen's own product: portable, always available; the float64 build
//            (gradient checks) always uses it.
//   "onednn" oneDNN's sgemm (Debian libdnnl-dev) for float32, when the build
//            selected it (CMake -DATTNLAB_GEMM=auto|onednn|eigen).
// In both, products of fewer than 32³ multiply-adds (attention heads) go to a
// small register-blocked kernel (gemm_small.h) when C's width is 16, 32, 48 or
// 64 and k <= 128, else to Eigen.
// Determinism: for a given backend, CPU and thread count the result is the same
// bits every call. A product is split across threads by output rows (or
// columns), each block computed by one thread with the kernel's own fixed order
// over k, so no output element has two owners. Results may differ in the last
// bits between backends, between thread counts and between CPUs (a kernel picks
// its code path, and so its summation order, by the instruction set it finds).
// Precision (set_gemm_precision; train and bench --precision):
//   fp32   operands, products and sums in the build's Real (the default).
//   bf16   mixed precision as torch.autocast("cpu", dtype=torch.bfloat16) does
//          it for matrix products: every product of at least 32³ multiply-adds
//          (those that go to the library) takes its operands rounded to bfloat16
//          (round to nearest even; NaN stays NaN) and accumulates and writes
//          fp32. The operands are rounded in their stored layout into
//          per-thread buffers that are reused (no allocation once warm), or
//          read from a Bf16Copy the caller made once for several products
//          (transposes are strides of the copies), the product is oneDNN's matmul
//          primitive (bf16 src and weights, f32 dst; alpha an output scale,
//          accumulate a sum post-op), one cached primitive per shape and thread,
//          split across threads as above. Smaller products (attention's heads
//          in S and M) stay fp32: their kernel has no bf16 path, and rounding
//          them would cost a copy without making them faster. Everything outside
//          the products (weights, optimizer, softmax, norms, loss) stays fp32.
//          bf16 needs oneDNN with a native bf16 kernel (AVX512_BF16 or AMX):
//          elsewhere set_gemm_precision refuses it, naming the kernel (emulated
//          bf16 is slower than fp32). The float64 build has fp32 (its Real) only.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "framework/choices.h"
#include "framework/tensor.h"

namespace attnlab {

// The precision of the matrix products (see above), and its values' names
// ("fp32", "bf16"; framework/choices.h).
enum class Precision { fp32, bf16 };
const ChoiceNames<Precision>& choice_names(Precision);

// A stored row-major matrix: element (i, j) at data[i * ld + j]. With trans set,
// the product uses its transpose. rows and cols are the stored sizes.
struct GemmOperand {
  const Real* data;
  int64_t rows, cols, ld;
  bool trans = false;
  // Precision bf16: the same stored matrix already rounded (from a Bf16Copy),
  // row stride bf16_ld (0: cols, contiguous), so the product reads it instead
  // of rounding the matrix again; null: the product rounds it. fp32 products
  // ignore it, and gemm_batched and the product log drop it (it covers one
  // matrix, one call).
  const uint16_t* bf16 = nullptr;
  int64_t bf16_ld = 0;
  int64_t op_rows() const { return trans ? cols : rows; }
  int64_t op_cols() const { return trans ? rows : cols; }
  int64_t bf16_stride() const { return bf16_ld > 0 ? bf16_ld : cols; }
};

// The destination: m x n, row stride ld.
struct GemmOutput {
  Real* data;
  int64_t rows, cols, ld;
};

// C = alpha op(A) op(B), or C += alpha op(A) op(B) when accumulate is set.
// op(A) is (m, k), op(B) is (k, n), C is (m, n): mismatched sizes are an
// internal error (assert); the ops check user-facing shapes before calling.
// With accumulate unset, C's old contents are never read (it may be
// uninitialised memory). Threads: those of OpenMP when called outside a
// parallel region and the product is large enough; one inside a region.
void gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate);

// `count` products C_i (=|+=) alpha op(A_i) op(B_i), operand i starting at
// data + i * stride (a stride of 0: one matrix shared by every product). With
// c_stride 0 all products go into the one C, in order i = 0, 1, ... (the first
// overwrites it unless accumulate is set, the others add). Otherwise the
// products run in parallel over i when there is enough work, each on one thread.
void gemm_batched(int64_t count, const GemmOutput& c, int64_t c_stride, const GemmOperand& a, int64_t a_stride,
                  const GemmOperand& b, int64_t b_stride, Real alpha, bool accumulate);

// The backend in use: "eigen" or "onednn" (at start, the one the build selected).
const char* gemm_backend();
// Switches this process to the backend named (bench --gemm; A/B measurements in
// one binary). Throws ValueError naming it when it is unknown or not built in.
// Not to be called while products run on other threads.
void set_gemm_backend(const std::string& name);
// The backend with its version and the instruction set its kernels use on this
// CPU, e.g. "onednn 2.6.3 (avx512_core_amx)" or "eigen 3.4.0 (AVX512, FMA, ...)";
// under precision bf16 also oneDNN's bf16 matmul kernel: "(avx512_core_bf16;
// bf16 matmul brg:avx512_core_bf16)".
std::string gemm_kernel();

// The precision of the products from now on, in this process. bf16 throws
// ValueError naming the kernel where it has no native bf16 product (the Eigen
// backend, a CPU without AVX512_BF16 or AMX, the float64 build). Not to be
// called while products run on other threads.
Precision gemm_precision();
void set_gemm_precision(Precision p);
// The ValueError set_gemm_precision(p) would throw, thrown without setting
// anything: "NAME bf16 is not available: <why>".
void check_gemm_precision(Precision p, const std::string& name = "precision");
// Whether bf16 products are native here; if not, why not (one sentence).
bool bf16_products_native(std::string* why = nullptr);

// Whether a product of these sizes (op(A) m x k, op(B) k x n) runs in bf16 now:
// precision bf16 and at least 32³ multiply-adds (smaller ones stay fp32).
bool gemm_in_bf16(int64_t m, int64_t n, int64_t k);

// A stored matrix rounded to bf16 once for the several products that read it
// (a linear layer's input: its forward product and its weight gradient), passed
// as the operands' `bf16`. Rounds as the products do (nearest, ties to even);
// holds rows x cols contiguous, from the buffer cache of framework/memory_pool.h.
// An empty one (default) holds nothing.
class Bf16Copy {
 public:
  Bf16Copy() = default;
  explicit Bf16Copy(const GemmOperand& stored);
  ~Bf16Copy();
  Bf16Copy(Bf16Copy&& other) noexcept;
  Bf16Copy& operator=(Bf16Copy&& other) noexcept;
  Bf16Copy(const Bf16Copy&) = delete;
  Bf16Copy& operator=(const Bf16Copy&) = delete;
  const uint16_t* data() const { return data_; }

 private:
  uint16_t* data_ = nullptr;
  size_t count_ = 0;
};

// Sets a precision for its lifetime, restoring the one before (a training run's).
class GemmPrecisionScope {
 public:
  explicit GemmPrecisionScope(Precision p) : before_(gemm_precision()) { set_gemm_precision(p); }
  ~GemmPrecisionScope() { set_gemm_precision(before_); }
  GemmPrecisionScope(const GemmPrecisionScope&) = delete;
  GemmPrecisionScope& operator=(const GemmPrecisionScope&) = delete;

 private:
  Precision before_;
};

namespace detail {
// x rounded to the nearest bfloat16 (ties to even), returned as a float; NaN stays NaN.
float round_to_bf16(float x);
// The bf16 product computed by emulation: operands rounded to bf16 into float
// buffers, then Eigen's fp32 product. What precision bf16 computes, up to the
// order of the sums (the tests' second reference).
void bf16_emulated_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate);
// With `allow` set, bf16 is accepted where it is not native, and its products
// are emulated (the tests, on CPUs without bf16; never the CLI).
void allow_emulated_bf16(bool allow);
// The Eigen backend alone, whatever the build selected (the tests compare the two).
void eigen_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate);
}  // namespace detail

}  // namespace attnlab
