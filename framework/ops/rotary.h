#pragma once
// Rotary position embedding (RoPE; Su et al., 2021) as an op.
#include "framework/autograd.h"

namespace attnlab {

// x (..., T, d_k), usually (B, h, T, d_k), d_k even. In the row at time t the
// interleaved pair (x[2i], x[2i+1]) is rotated by θ = p · base^(−2i/d_k) with
// p = offset + t:
//   y[2i]   = x[2i] cos θ − x[2i+1] sin θ
//   y[2i+1] = x[2i] sin θ + x[2i+1] cos θ
// A rotation is orthogonal, so backward applies the inverse rotation (−θ) to
// the gradient. Throws ValueError for an odd d_k or a base that is not a
// positive finite number, ShapeError for fewer than 2 dims.
Var rotary(const Var& x, int64_t offset = 0, Real base = 10000);

// ValueError unless d_k is even: rotary's precondition, also checked by a
// module that will rotate (MultiHeadAttention, at construction).
void check_rotary_width(int64_t d_k);

// rotary on the heads where the projections write them: x (B, T, h·d_k), the
// row of head j at time t being x[b, t, j·d_k : (j+1)·d_k]. The same
// arithmetic as rotary on the (B, h, T, d_k) split, without the split.
Var rotary_heads(const Var& x, int64_t n_heads, int64_t offset = 0, Real base = 10000);

}  // namespace attnlab
