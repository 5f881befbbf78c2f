#include "framework/nn/linear.h"

#include <cmath>
#include <string>

#include "framework/ops/matmul.h"
#include "framework/ops/shape.h"

namespace attnlab {

namespace {
Tensor symmetric_uniform(Shape shape, Rng& rng, double bound) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(-bound, bound));
  return t;
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, Rng& init, bool bias) : in_(in), out_(out) {
  if (in <= 0 || out <= 0)
    throw ValueError("Linear: sizes must be positive, got in = " + std::to_string(in) +
                     ", out = " + std::to_string(out));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", symmetric_uniform({out, in}, init, bound));
  if (bias) this->bias = register_parameter("bias", symmetric_uniform({out}, init, bound));
}

void Linear::check_input(const Var& x) const {
  if (x.dim() < 1 || x.size(-1) != in_)
    throw ShapeError("Linear(in = " + std::to_string(in_) + ", out = " + std::to_string(out_) +
                     "): expected input of shape (..., " + std::to_string(in_) + "), got " +
                     x.value().shape_str());
}

Var Linear::forward(const Var& x) const {
  check_input(x);
  return linear(x, weight, bias);
}

Var stacked_forward(const std::vector<const Linear*>& layers, const Var& x) {
  if (layers.empty()) throw ValueError("stacked_forward: no layers to stack");
  const Linear& first = *layers[0];
  auto describe = [](const Linear& l) {  // "Linear(5, 3, bias)"
    return "Linear(" + std::to_string(l.in_features()) + ", " + std::to_string(l.out_features()) +
           (l.bias.defined() ? ", bias)" : ", no bias)");
  };
  std::vector<Var> weights, biases;
  for (const Linear* l : layers) {
    if (l->in_features() != first.in_features() || l->bias.defined() != first.bias.defined())
      throw ValueError("stacked_forward: " + describe(*l) + " does not stack with " + describe(first) +
                       ": the layers must share the input width and all have a bias or none");
    weights.push_back(l->weight);
    if (l->bias.defined()) biases.push_back(l->bias);
  }
  first.check_input(x);
  if (layers.size() == 1) return first.forward(x);
  return linear(x, concat(weights, 0), biases.empty() ? Var() : concat(biases, 0));  // (..., Σ out)
}

Var Linear::forward_relu(const Var& x) const {
  check_input(x);
  return linear_relu(x, weight, bias);
}

}  // namespace attnlab
