// The small-product kernel (see gemm_small.h).
#include "framework/ops/gemm_small.h"

#include <cassert>
#include <cmath>

// GCC's tuning for recent x86 cores keeps auto-vectorised loops at 256 bits even where
// AVX-512 is available; these loops are made of FMAs on 16-float rows, which 512-bit
// registers run at twice the rate (harmless on a build without AVX-512).
#pragma GCC target("prefer-vector-width=512")

namespace attnlab::detail {

namespace {

// One multiply-add; fused where the build's instruction set has FMA (the
// compiler then turns the loops below into vector FMAs), else a multiply and
// an add, never a call into libm.
inline Real mul_add(Real x, Real y, Real acc) {
#ifdef __FMA__
  return std::fma(x, y, acc);
#else
  return acc + x * y;
#endif
}

// Rows [i0, i0 + R) of C from op(B), stored row-major with row stride ldb.
// op(A)(i, p) is at a[i * a_row + p * a_col].
template <int R, int N>
void row_block(const GemmOutput& c, int64_t i0, const Real* a, int64_t a_row, int64_t a_col, const Real* b,
               int64_t ldb, int64_t k, Real alpha, bool accumulate) {
  Real acc[R][N] = {};
  for (int64_t p = 0; p < k; ++p) {
    const Real* brow = b + p * ldb;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const Real x = a[(i0 + r) * a_row + p * a_col];
#pragma GCC unroll 64
      for (int j = 0; j < N; ++j) acc[r][j] = mul_add(x, brow[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    Real* row = c.data + (i0 + r) * c.ld;
    if (accumulate)
      for (int j = 0; j < N; ++j) row[j] = mul_add(alpha, acc[r][j], row[j]);
    else
      for (int j = 0; j < N; ++j) row[j] = alpha * acc[r][j];
  }
}

template <int N>
void rows(const GemmOutput& c, const GemmOperand& a, const Real* b, int64_t ldb, int64_t k, Real alpha,
          bool accumulate) {
  const int64_t a_row = a.trans ? 1 : a.ld, a_col = a.trans ? a.ld : 1;
  constexpr int kRows = N <= 16 ? 8 : 4;  // 8-16 accumulators of 16 floats: enough in flight to hide FMA latency
  int64_t i = 0;
  for (; i + kRows <= c.rows; i += kRows)
    row_block<kRows, N>(c, i, a.data, a_row, a_col, b, ldb, k, alpha, accumulate);
  for (; i < c.rows; ++i) row_block<1, N>(c, i, a.data, a_row, a_col, b, ldb, k, alpha, accumulate);
}

}  // namespace

bool small_gemm_fits(int64_t n, int64_t k) {
  return n > 0 && n % 16 == 0 && n <= kSmallGemmMaxN && k > 0 && k <= kSmallGemmMaxK;
}

void small_gemm(const GemmOutput& c, const GemmOperand& a, const GemmOperand& b, Real alpha, bool accumulate) {
  const int64_t k = a.op_cols(), n = c.cols;
  assert(small_gemm_fits(n, k) && b.op_rows() == k && b.op_cols() == n && a.op_rows() == c.rows);
  // op(B) row by row: B itself, or Bᵀ copied upright into a k x n block.
  alignas(64) Real packed[kSmallGemmMaxK * kSmallGemmMaxN];
  const Real* rows_of_b = b.data;
  int64_t ldb = b.ld;
  if (b.trans) {
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) packed[p * n + j] = b.data[j * b.ld + p];
    rows_of_b = packed, ldb = n;
  }
  switch (n) {
    case 16: return rows<16>(c, a, rows_of_b, ldb, k, alpha, accumulate);
    case 32: return rows<32>(c, a, rows_of_b, ldb, k, alpha, accumulate);
    case 48: return rows<48>(c, a, rows_of_b, ldb, k, alpha, accumulate);
    default: return rows<64>(c, a, rows_of_b, ldb, k, alpha, accumulate);
  }
}

}  // namespace attnlab::detail
