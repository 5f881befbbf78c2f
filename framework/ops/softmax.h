#pragma once
// Fused, numerically stable softmax and log-softmax along the last axis.
//
// A row whose entries are all -inf (fully masked) has no defined softmax. We
// define it as all zeros (and log_softmax as all -inf): such a row attends to
// nothing, its output is zero and no gradient flows through it. This never
// produces NaN.
#include <limits>

#include "framework/autograd.h"

namespace attnlab {

// The score of a masked position (and log_softmax of a fully masked row).
inline constexpr Real kNegInf = -std::numeric_limits<Real>::infinity();

Var softmax(const Var& a);
Var log_softmax(const Var& a);

// Row kernels shared with the fused attention and loss kernels.
// x and y hold `n` values; y may alias x.
void softmax_row(const Real* x, Real* y, int64_t n);
void log_softmax_row(const Real* x, Real* y, int64_t n);

namespace detail {
// softmax_row for any n, chunk by chunk; softmax_row runs rows of 16, 32 and 64
// values on a fixed-size copy of the same steps, which must give the same bits.
void softmax_row_chunked(const Real* x, Real* y, int64_t n);
}  // namespace detail

// Rows of `n` values each are worth spreading over threads only when there is enough work to
// pay for waking the team (~ tens of microseconds of exp()): softmax's and the loss's kernels.
inline constexpr int64_t kSoftmaxParallelMinElements = 1 << 15;
inline bool softmax_rows_worth_parallel(int64_t rows, int64_t n) {
  return rows > 1 && rows * n >= kSoftmaxParallelMinElements;
}

}  // namespace attnlab
