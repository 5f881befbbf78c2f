#pragma once
// Fused layer normalisation over the last axis (as torch.nn.LayerNorm).
#include "framework/autograd.h"

namespace attnlab {

// x (..., d), weight (d), bias (d) -> (..., d); either affine term may be undefined.
// Backward uses the cached per-row mean and 1/std.
Var layer_norm(const Var& x, const Var& weight, const Var& bias, Real eps = 1e-5);

}  // namespace attnlab
