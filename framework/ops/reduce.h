#pragma once
// Reductions.
#include "framework/autograd.h"

namespace attnlab {

Var sum(const Var& a);                                 // all -> shape ()
Var mean(const Var& a);                                // all -> shape ()
Var sum(const Var& a, int axis, bool keepdim = false);   // along one axis
Var mean(const Var& a, int axis, bool keepdim = false);

}  // namespace attnlab
