#pragma once
// A kernel for the smallest products of the engine: the per-head products of
// attention at short lengths and narrow heads (S: 16 x 16 x 16, M: 32 x 16 x 32),
// where a library's packing and dispatch cost more than the multiply-adds
// (docs/performance.md, "Matrix products", has the measurements).
// op(B) is read row by row where it is stored (copied upright onto the stack
// first only when it is transposed); blocks of 8 rows of C (C 16 wide) or 4
// rows (wider) are accumulated in registers over k, in k's order: one fixed
// summation order for every element, whatever the thread count.
#include "framework/ops/gemm.h"

namespace attnlab::detail {

// The widest C the small kernel takes: n a multiple of 16 up to this, and k up
// to kSmallGemmMaxK (the packed op(B) lives on the stack).
constexpr int64_t kSmallGemmMaxN = 64;
constexpr int64_t kSmallGemmMaxK = 128;

// Whether small_gemm() takes a product of these sizes.
bool small_gemm_fits(int64_t n, int64_t k);

// C = alpha op(A) op(B), or C += ... when accumulate is set; the sizes must fit.
void small_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate);

}  // namespace attnlab::detail
