#include "framework/hessian.h"

#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"

namespace attnlab {

HessianVectorProduct::HessianVectorProduct(const std::function<Var()>& loss, std::vector<Var> params)
    : params_(std::move(params)) {
  SecondOrderGuard second_order;
  const Var l = loss();
  if (!l.defined() || l.numel() != 1)
    throw ShapeError("HessianVectorProduct: the loss must hold one value");
  loss_value_ = l.item();
  gradient_graph_ = grad_graph({l}, {Var(Tensor::from({}, {Real(1)}))}, params_);
  for (const Var& g : gradient_graph_) gradient_.push_back(g.value());
}

std::vector<Tensor> HessianVectorProduct::apply(const std::vector<Tensor>& v) {
  if (v.size() != params_.size())
    throw ShapeError("HessianVectorProduct: " + std::to_string(v.size()) + " vectors for " +
                     std::to_string(params_.size()) + " parameters");
  // s = sum_i <g_i, v_i>; its gradient is Hv.
  Var s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].shape() != params_[i].shape())
      throw ShapeError("HessianVectorProduct: vector " + std::to_string(i) + " has shape " + v[i].shape_str() +
                       ", its parameter " + params_[i].value().shape_str());
    if (!gradient_graph_[i].requires_grad()) continue;  // g_i constant: no part of Hv
    Var part = sum(mul(gradient_graph_[i], Var(v[i])));
    s = s.defined() ? add(s, part) : part;
  }
  // The callers' gradients stay as they were: set aside, then put back.
  std::vector<Tensor> saved;
  for (Var& p : params_) saved.push_back(std::move(p.grad()));
  for (Var& p : params_) p.grad() = Tensor();
  if (s.defined() && s.requires_grad()) backward(s, 1, /*keep_graph=*/true);
  std::vector<Tensor> hv;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& g = params_[i].grad();
    hv.push_back(g.empty() ? Tensor(params_[i].shape()) : std::move(g));
    g = std::move(saved[i]);
  }
  return hv;
}

}  // namespace attnlab
