#pragma once
// Linear: y = x Wᵀ + b, as torch.nn.Linear.
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
  void check_input(const Var& x) const;  // ShapeError unless x is (..., in)
  int64_t in_, out_;
};

}  // namespace attnlab
