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
#include <cstdint>
#include <string>

#include "framework/tensor.h"

namespace attnlab {

// A stored row-major matrix: element (i, j) at data[i * ld + j]. With trans set,
// the product uses its transpose. rows and cols are the stored sizes.
struct GemmOperand {
  const Real* data;
  int64_t rows, cols, ld;
  bool trans = false;
  int64_t op_rows() const { return trans ? cols : rows; }
  int64_t op_cols() const { return trans ? rows : cols; }
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
// CPU, e.g. "onednn 2.6.3 (avx512_core_amx)" or "eigen 3.4.0 (AVX512, FMA, ...)".
std::string gemm_kernel();

namespace detail {
// The Eigen backend alone, whatever the build selected (the tests compare the two).
void eigen_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate);
}  // namespace detail

}  // namespace attnlab
