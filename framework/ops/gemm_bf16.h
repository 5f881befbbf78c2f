#pragma once
// Inside the matrix products (framework/ops/gemm.h), shared by gemm.cpp and
// gemm_bf16.cpp: how a product is split across threads, and the bf16 product
// on oneDNN's matmul primitive. Not installed for users; gemm.h is the interface.
#include <cstdint>
#include <functional>
#include <string>

#include "framework/ops/gemm.h"

#if defined(ATTNLAB_GEMM_ONEDNN) && !defined(ATTNLAB_DOUBLE)
#define ATTNLAB_USE_ONEDNN 1
#endif

namespace attnlab::detail {

#ifdef ATTNLAB_USE_ONEDNN
// Calls block(lo, hi, by_rows) for each block of a product whose C is rows x
// cols with k terms: whole rows [lo, hi) of C (or, for a wide C, whole
// columns), block edges on multiples of 16, one OpenMP thread per block. The
// split depends only on the sizes and the thread count (one block inside a
// parallel region, or when the product is too small to share).
void for_each_block(int64_t rows, int64_t cols, int64_t k, const std::function<void(int64_t, int64_t, bool)>& block);

// Whether oneDNN's bf16 matmul has a native kernel on this CPU (its name in
// *kernel, e.g. "brg:avx512_core_bf16", or why not).
bool onednn_bf16_native(std::string* kernel);
// The bf16 product on oneDNN (gemm.h, precision bf16), split by for_each_block.
void onednn_bf16_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate);
#endif

}  // namespace attnlab::detail
