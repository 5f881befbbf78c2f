#pragma once
// Gradient clipping by global L2 norm, as torch.nn.utils.clip_grad_norm_.
#include <vector>

#include "framework/autograd.h"

namespace attnlab {

// The L2 norm over the gradients of all `params` (those without a gradient
// are skipped), accumulated in double in a fixed order, so it is the same
// on every run: the squares of each kOptimChunk elements of a parameter
// (framework/optim/chunks.h) are summed apart, and these sums are added in
// parameter and chunk order. A process that holds some chunks of a sharded
// model contributes their sums (chunk_square_sums), and norm_of adds them. When max_norm / (norm + 1e-6) < 1 every gradient is scaled
// by that factor (torch's rule, including its 1e-6). Returns the norm before
// clipping. A non-finite norm is returned with the gradients left untouched
// (torch would turn them into NaN), so the caller can skip the step.
// ValueError unless max_norm > 0.
double clip_grad_norm(const std::vector<Var>& params, double max_norm);

// The same norm without clipping.
double grad_norm(const std::vector<Var>& params);

// The squares of x[0, n) summed per kOptimChunk elements, appended to `out`.
void chunk_square_sums(const Real* x, int64_t n, std::vector<double>& out);
// The norm of chunk square sums: their total, added in order, square-rooted.
double norm_of(const std::vector<double>& square_sums);
// clip_grad_norm's scaling for a norm computed already (of every process's
// chunks); returns it. ValueError unless max_norm > 0.
double clip_to_norm(const std::vector<Var>& params, double norm, double max_norm);

}  // namespace attnlab
