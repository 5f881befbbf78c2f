#include "framework/curvature.h"

#include <string>

#include "framework/error.h"

namespace attnlab {

std::vector<double> flatten(const std::vector<Tensor>& tensors) {
  std::vector<double> out;
  for (const Tensor& t : tensors) out.insert(out.end(), t.data(), t.data() + t.numel());
  return out;
}

std::vector<Tensor> unflatten(const std::vector<double>& flat, const std::vector<Var>& like) {
  std::vector<Tensor> out;
  size_t at = 0;
  for (const Var& p : like) {
    Tensor t(p.shape());
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(flat.at(at++));
    out.push_back(std::move(t));
  }
  if (at != flat.size())
    throw ShapeError("unflatten: " + std::to_string(flat.size()) + " values for parameters of " +
                     std::to_string(at));
  return out;
}

TopEigen largest_curvature(HessianVectorProduct& hvp, const std::vector<Tensor>& scale, std::vector<double> start,
                           const TopEigenOptions& options) {
  const std::vector<Var>& params = hvp.params();
  const std::vector<double> d = flatten(scale);
  size_t n = 0;
  for (const Var& p : params) n += static_cast<size_t>(p.numel());
  if (!scale.empty() && d.size() != n)
    throw ShapeError("largest_curvature: a scale of " + std::to_string(d.size()) + " values for " +
                     std::to_string(n) + " parameters");
  if (start.size() != n)
    throw ShapeError("largest_curvature: a start of " + std::to_string(start.size()) + " values for " +
                     std::to_string(n) + " parameters");
  const auto scaled = [&d](std::vector<double> v) {  // D v, or v without a scale
    for (size_t i = 0; i < d.size(); ++i) v[i] *= d[i];
    return v;
  };
  const SymmetricOperator A = [&](const std::vector<double>& v) {
    return scaled(flatten(hvp.apply(unflatten(scaled(v), params))));
  };
  return top_eigenvalue(A, std::move(start), options);
}

}  // namespace attnlab
