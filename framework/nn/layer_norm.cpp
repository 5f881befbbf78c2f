#include "framework/nn/layer_norm.h"

#include <string>

#include "framework/ops/norm.h"

namespace attnlab {

LayerNorm::LayerNorm(int64_t d, Real eps) : d_(d), eps_(eps) {
  if (d <= 0) throw ValueError("LayerNorm: d must be positive, got " + std::to_string(d));
  if (!(eps >= 0)) throw ValueError("LayerNorm: eps must be non-negative, got " + std::to_string(eps));
  weight = register_parameter("weight", Tensor({d}, 1));
  bias = register_parameter("bias", Tensor({d}, 0));
}

Var LayerNorm::forward(const Var& x) const {
  if (x.dim() < 1 || x.size(-1) != d_)
    throw ShapeError("LayerNorm(" + std::to_string(d_) + "): expected input of shape (..., " + std::to_string(d_) +
                     "), got " + x.value().shape_str());
  return layer_norm(x, weight, bias, eps_);
}

}  // namespace attnlab
