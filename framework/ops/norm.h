#pragma once
// Fused layer normalisation over the last axis (as torch.nn.LayerNorm).
#include "framework/autograd.h"

namespace attnlab {

// x (..., d), weight (d), bias (d) -> (..., d); either affine term may be undefined.
// Backward uses the cached per-row mean and 1/std.
Var layer_norm(const Var& x, const Var& weight, const Var& bias, Real eps = 1e-5);

// layer_norm's gradient with respect to x from g = dL/dx̂ (x̂ = (x − mean) / σ,
// σ = sqrt(var + eps), per row of the last axis): (g − mean(g) − x̂·mean(g·x̂)) / σ,
// x and g (..., d). Differentiable once (a hand-written backward, framework/ops/norm_grad.cpp):
// the fused piece of layer_norm's second derivative.
Var layer_norm_input_grad(const Var& x, const Var& g, Real eps);

}  // namespace attnlab
