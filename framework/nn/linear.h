#pragma once
// Linear: y = x Wᵀ + b, as torch.nn.Linear.
#include <vector>

#include "framework/nn/module.h"
#include "framework/random.h"

namespace attnlab {

class Linear : public Module {
 public:
  // Init as torch.nn.Linear's default (kaiming_uniform with a = sqrt(5)):
  // weight and bias ~ U(−1/sqrt(in), 1/sqrt(in)), drawn from `init` in this
  // order: weight row by row (row-major), then bias.
  // Sizes must be positive (ValueError naming them otherwise).
  Linear(int64_t in, int64_t out, Rng& init, bool bias = true);

  // x (..., in) -> (..., out). A last dim other than `in` throws ShapeError.
  Var forward(const Var& x) const;
  // relu(forward(x)) through the fused linear_relu op (one pass for bias and ReLU).
  Var forward_relu(const Var& x) const;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

  Var weight;  // (out, in), stored as torch stores it
  Var bias;    // (out); undefined when constructed without bias

 private:
  friend Var stacked_forward(const std::vector<const Linear*>& layers, const Var& x);
  void check_input(const Var& x) const;  // ShapeError unless x is (..., in)
  int64_t in_, out_;
};

// Several Linears of one input as one product: x (..., in) ->
// (..., out_1 + … + out_n), the outputs side by side in the order given:
// x [W_1; …; W_n]ᵀ + [b_1; …; b_n]. The layers keep their own parameters (so
// their names, shapes, optimizer state and checkpoints do not change); each
// call stacks the weights (concat: one copy of the n·out·in weights, and
// backward splits the stacked weight gradient back into theirs), about
// 1/rows of the product's own work. The layers must share `in` and all have
// a bias or none (ValueError naming them otherwise); x must be (..., in)
// (ShapeError as Linear::forward).
Var stacked_forward(const std::vector<const Linear*>& layers, const Var& x);

}  // namespace attnlab
