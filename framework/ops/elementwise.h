#pragma once
// Elementwise ops. Binary ops broadcast numpy-style (shapes right-aligned, a
// dim of size 1 or a missing dim stretches): a scalar, a row (bias), a column
// (per-row scale) or a mask all fit. The gradient of a broadcast input is
// summed back to that input's shape. A shape that does not fit throws
// ShapeError naming both shapes.
#include "framework/autograd.h"

namespace attnlab {

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op);

Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var div(const Var& a, const Var& b);
Var neg(const Var& a);
Var scale(const Var& a, Real s);       // a * s
Var add_scalar(const Var& a, Real s);  // a + s

Var exp(const Var& a);
Var log(const Var& a);
Var sqrt(const Var& a);
Var tanh(const Var& a);
Var relu(const Var& a);
Var gelu(const Var& a);  // exact: x * Phi(x), as torch.nn.GELU()

// Where mask is non-zero, the result is `value` (default -inf) and no gradient
// flows back; mask broadcasts to a's shape like a binary op's second operand.
Var masked_fill(const Var& a, const Tensor& mask, Real value);

// Causal mask (T_q, T_k): 1 where key j lies in the future of query i
// (j > i + (T_k - T_q)), 0 elsewhere.
Tensor causal_mask(int64_t t_q, int64_t t_k);

inline Var operator+(const Var& a, const Var& b) { return add(a, b); }
inline Var operator-(const Var& a, const Var& b) { return sub(a, b); }
inline Var operator*(const Var& a, const Var& b) { return mul(a, b); }
inline Var operator/(const Var& a, const Var& b) { return div(a, b); }
inline Var operator-(const Var& a) { return neg(a); }

}  // namespace attnlab
