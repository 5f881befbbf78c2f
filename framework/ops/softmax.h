#pragma once
// Fused, numerically stable softmax and log-softmax along the last axis.
//
// A row whose entries are all -inf (fully masked) has no defined softmax. We
// define it as all zeros (and log_softmax as all -inf): such a row attends to
// nothing, its output is zero and no gradient flows through it. This never
// produces NaN.
#include "framework/autograd.h"

namespace attnlab {

Var softmax(const Var& a);
Var log_softmax(const Var& a);

// Row kernels shared with the fused attention and loss kernels.
// x and y hold `n` values; y may alias x.
void softmax_row(const Real* x, Real* y, int64_t n);
void log_softmax_row(const Real* x, Real* y, int64_t n);

}  // namespace attnlab
