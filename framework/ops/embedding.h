#pragma once
// Embedding lookup.
#include "framework/autograd.h"

namespace attnlab {

// weight (V, d), ids (...) in [0, V) -> (..., d). The gradient is scattered
// back into the rows of weight, accumulating for repeated ids. An id out of
// range throws ValueError naming the id and V.
Var embedding(const Var& weight, const IntTensor& ids);

// embedding's backward as an op (its second order): grad (..., d) scattered
// into a (V, d) table of zeros, rows[ids[i]] += grad[i].
Var embedding_scatter(const Var& grad, const IntTensor& ids, int64_t V);

}  // namespace attnlab
