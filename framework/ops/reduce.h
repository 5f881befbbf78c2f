#pragma once
// Reductions.
#include "framework/autograd.h"

namespace attnlab {

Var sum(const Var& a);                                 // all -> shape ()
Var mean(const Var& a);                                // all -> shape ()
Var sum(const Var& a, int axis, bool keepdim = false);   // along one axis
Var mean(const Var& a, int axis, bool keepdim = false);
// a summed over the dims along which `shape` broadcasts to a's shape, so that
// the result has `shape` (a broadcast input's gradient); a itself when equal.
Var sum_to(const Var& a, const Shape& shape);
// a stretched to `shape` (numpy broadcasting); a itself when equal.
Var broadcast_to(const Var& a, const Shape& shape);

}  // namespace attnlab
