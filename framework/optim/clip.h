#pragma once
// Gradient clipping by global L2 norm, as torch.nn.utils.clip_grad_norm_.
#include <vector>

#include "framework/autograd.h"

namespace attnlab {

// The L2 norm over the gradients of all `params` (those without a gradient
// are skipped), accumulated in double in a fixed order, so it is the same
// on every run. When max_norm / (norm + 1e-6) < 1 every gradient is scaled
// by that factor (torch's rule, including its 1e-6). Returns the norm before
// clipping. A non-finite norm is returned with the gradients left untouched
// (torch would turn them into NaN), so the caller can skip the step.
// ValueError unless max_norm > 0.
double clip_grad_norm(const std::vector<Var>& params, double max_norm);

// The same norm without clipping.
double grad_norm(const std::vector<Var>& params);

}  // namespace attnlab
