#pragma once
// Matrix products on row-major storage, through the one product interface
// (gemm.h: oneDNN or Eigen behind it), with their backward.
#include "framework/autograd.h"

namespace attnlab {

// a: (..., m, k) (or (..., k, m) with trans_a), b: (..., k, n) (or (..., n, k)
// with trans_b). Batched when either has more than 2 dims: the leading dims
// must be equal, or b is 2-d and shared by every batch (a weight matrix).
// Result (..., m, n). Mismatched inner sizes throw ShapeError naming both shapes.
Var matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false);

// Fused affine map as torch.nn.Linear: x (..., in), weight (out, in),
// optional bias (out) -> (..., out) = x Wᵀ + b. Pass an undefined Var for no bias.
Var linear(const Var& x, const Var& weight, const Var& bias);

// relu(linear(x, weight, bias)) as one op: the bias and the ReLU are applied
// in one pass over the output, and no separate pre-activation tensor or
// gradient is kept (the backward masks by output > 0).
Var linear_relu(const Var& x, const Var& weight, const Var& bias);

}  // namespace attnlab
