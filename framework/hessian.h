#pragma once
// Exact Hessian-vector products of a scalar loss with respect to parameters.
//
// The engine differentiates its own backward (PyTorch's create_graph): the
// loss is built while a SecondOrderGuard records, for every op, a backward
// written in differentiable ops (framework/autograd.h, grad_graph); the
// gradient g = dL/dθ is then itself a graph, and Hv = d(g·v)/dθ is one
// ordinary backward pass through it (about two backward passes of the loss).
//
//   HessianVectorProduct hvp([&] { return loss_of(model, batch); }, model.parameters());
//   std::vector<Tensor> hv = hvp.apply(v);     // v: one tensor per parameter
//   std::vector<Tensor> hw = hvp.apply(w);     // the graph is kept: no new forward
//
// The parameters' gradient buffers are left as they were (saved and
// restored), so a probe may run between a step's backward and its update.
// Fused kernels take their composed form's second derivative
// (framework/ops/composed.h). An op without second derivatives throws
// ValueError naming it, from the constructor.
#include <functional>
#include <vector>

#include "framework/autograd.h"

namespace attnlab {

class HessianVectorProduct {
 public:
  // loss() is called once, here, and must return a one-element Var that
  // depends on the parameters.
  HessianVectorProduct(const std::function<Var()>& loss, std::vector<Var> params);

  // Hv, one tensor per parameter (shapes as the parameters'). ShapeError when
  // v's count or shapes differ from the parameters'.
  std::vector<Tensor> apply(const std::vector<Tensor>& v);

  Real loss() const { return loss_value_; }
  // dL/dθ at the parameters, one tensor per parameter.
  const std::vector<Tensor>& gradient() const { return gradient_; }
  const std::vector<Var>& params() const { return params_; }

 private:
  std::vector<Var> params_;
  std::vector<Var> gradient_graph_;  // g_i as Vars (differentiable)
  std::vector<Tensor> gradient_;
  Real loss_value_ = 0;
};

}  // namespace attnlab
