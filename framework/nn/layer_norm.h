#pragma once
// LayerNorm over the last axis, as torch.nn.LayerNorm(d).
#include "framework/nn/module.h"

namespace attnlab {

class LayerNorm : public Module {
 public:
  // Init as torch: weight ones, bias zeros (no random draws). d must be
  // positive and eps non-negative (ValueError otherwise).
  explicit LayerNorm(int64_t d, Real eps = 1e-5);

  // x (..., d) -> (..., d) through the fused layer_norm op. A last dim other
  // than d throws ShapeError.
  Var forward(const Var& x) const;

  int64_t dim() const { return d_; }
  Real eps() const { return eps_; }

  Var weight;  // (d)
  Var bias;    // (d)

 private:
  int64_t d_;
  Real eps_;
};

}  // namespace attnlab
