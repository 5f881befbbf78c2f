#pragma once
// Inverted dropout: zero each entry with probability p and scale the rest by
// 1/(1-p), drawing from the given generator. Identity when !training or p == 0.
#include "framework/autograd.h"
#include "framework/random.h"

namespace attnlab {

Var dropout(const Var& a, Real p, Rng& rng, bool training);

}  // namespace attnlab
