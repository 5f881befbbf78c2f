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

// Rows of `n` values each are worth spreading over threads only when there is enough work to
// pay for waking the team (~ tens of microseconds of exp()): softmax's and the loss's kernels.
inline constexpr int64_t kSoftmaxParallelMinElements = 1 << 15;
inline bool softmax_rows_worth_parallel(int64_t rows, int64_t n) {
  return rows > 1 && rows * n >= kSoftmaxParallelMinElements;
}

}  // namespace attnlab
