// layer_norm's input gradient as an op of its own, the building block of
// layer_norm's second derivative (framework/ops/norm.cpp, layer_norm_graph_grads):
// one fused node and a hand-written backward in place of some twenty
// primitive ones. Per row of d values, with σ = sqrt(var + eps) and
// x̂ = (x − mean) / σ, the forward is
//   dx = (g − mean(g) − x̂ · mean(g · x̂)) / σ,
// and, with u = dL/d(dx), a = mean(u · x̂), m = mean(g · x̂) and
// L_row = Σ u · dx = Σ g · t, the backward is
//   dL/dg = t = (u − mean(u) − x̂ · a) / σ   (the same map applied to u),
//   dL/dx = (h − mean(h) − x̂ · mean(h · x̂)) / σ − L_row · x̂ / (d σ),  h = −(a g + m u) / σ,
// the last term from σ's own dependence on x (dσ/dx = x̂ / d).
#include "framework/ops/norm.h"

#include <cmath>

namespace attnlab {
namespace {

using Array = Eigen::Array<Real, Eigen::Dynamic, 1>;
using ConstArrayMap = Eigen::Map<const Eigen::Array<Real, Eigen::Dynamic, 1>>;
using ArrayMap = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;

constexpr int64_t kParallelMinElements = 1 << 14;

// x̂ of one row (staged in an aligned array: sums independent of the row's
// address, as norm.cpp) and its 1/σ.
Real normalized_row(const Real* x, int64_t d, Real eps, Array& x_hat) {
  x_hat = ConstArrayMap(x, d);
  const Real mu = x_hat.sum() / static_cast<Real>(d);
  x_hat -= mu;
  const Real rs = Real(1) / std::sqrt(x_hat.square().sum() / static_cast<Real>(d) + eps);
  x_hat *= rs;
  return rs;
}

// out = (v − mean(v) − x̂ · mean(v · x̂)) · rs for one row.
void project(const Array& v, const Array& x_hat, Real rs, Array& out) {
  const Real n = static_cast<Real>(v.size());
  out = (v - v.sum() / n - x_hat * ((v * x_hat).sum() / n)) * rs;
}

void input_grad_backward(Node& self, int64_t rows, int64_t d, Real eps) {
  const bool need_x = self.input_needs_grad(0), need_g = self.input_needs_grad(1);
  const Real *xd = self.input_value(0).data(), *gd = self.input_value(1).data(), *ud = self.grad.data();
  Real* dx = need_x ? self.input_grad(0).data() : nullptr;
  Real* dg = need_g ? self.input_grad(1).data() : nullptr;
  const Real n = static_cast<Real>(d);
#pragma omp parallel if (rows > 1 && rows * d >= kParallelMinElements)
  {
    Array x_hat(d), g(d), u(d), t(d), h(d), dxr(d);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const Real rs = normalized_row(xd + r * d, d, eps, x_hat);
      g = ConstArrayMap(gd + r * d, d);
      u = ConstArrayMap(ud + r * d, d);
      project(u, x_hat, rs, t);
      if (dg) ArrayMap(dg + r * d, d) += t;
      if (!dx) continue;
      const Real a = (u * x_hat).sum() / n, m = (g * x_hat).sum() / n, l_row = (g * t).sum();
      h = -(a * g + m * u) * rs;
      project(h, x_hat, rs, dxr);
      ArrayMap(dx + r * d, d) += dxr - x_hat * (l_row * rs / n);
    }
  }
}

}  // namespace

Var layer_norm_input_grad(const Var& x, const Var& g, Real eps) {
  if (x.dim() < 1 || g.shape() != x.shape())
    throw ShapeError("layer_norm_input_grad: x " + x.value().shape_str() + " and g " + g.value().shape_str() +
                     " must have one shape of at least 1 dim");
  const int64_t d = x.size(-1), rows = d ? x.numel() / d : 0;
  Tensor out = Tensor::uninitialized(x.shape());
  const Real* xd = x.value().data();
  const Real* gd = g.value().data();
#pragma omp parallel if (rows > 1 && rows * d >= kParallelMinElements)
  {
    Array x_hat(d), gr(d), dxr(d);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const Real rs = normalized_row(xd + r * d, d, eps, x_hat);
      gr = ConstArrayMap(gd + r * d, d);
      project(gr, x_hat, rs, dxr);
      ArrayMap(out.data() + r * d, d) = dxr;
    }
  }
  return make_result(std::move(out), {x, g}, "layer_norm_input_grad",
                     [rows, d, eps](Node& self) { input_grad_backward(self, rows, d, eps); },
                     ValueReads{false, ~0u});  // x and g, not the output
}

}  // namespace attnlab
