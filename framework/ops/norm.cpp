// Fused layer normalisation over the last axis: forward caches the per-row
// mean and 1/std, backward recomputes x_hat from them (llm.c's layernorm).
// Under a SecondOrderGuard it also records its backward's formulas in
// differentiable ops (layer_norm_graph_grads).
#include "framework/ops/norm.h"

#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attnlab {
namespace {

using ArrayMap = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;
using ConstArrayMap = Eigen::Map<const Eigen::Array<Real, Eigen::Dynamic, 1>>;
using Array = Eigen::Array<Real, Eigen::Dynamic, 1>;

constexpr int64_t kNormParallelMinElements = 1 << 14;

// Rows are staged through aligned Eigen arrays and reductions run over
// expressions so that no result depends on a row's address: Eigen would
// otherwise peel the unaligned head of a row with scalar code and change the
// summation order (see softmax.cpp).

// The weight and bias gradients sum over rows. Rows are cut into a fixed
// number of chunks (independent of the thread count), each chunk sums into its
// own partial, and the partials are added in chunk order: no two threads write
// the same memory and the result is bitwise reproducible.
constexpr int64_t kGradChunks = 32;

void check_affine(const Var& p, int64_t d, const Shape& x_shape, const char* what) {
  if (!p.defined()) return;
  if (p.shape() != Shape{d})
    throw ShapeError(std::string("layer_norm: ") + what + " must have shape (" + std::to_string(d) +
                     ",) for input " + shape_str(x_shape) + ", got " + shape_str(p.shape()));
}

// Each row of d: y = (x - mean) * rstd * w + b, caching the row's mean and rstd.
void normalize_rows(const Real* xd, const Real* w, const Real* b, int64_t rows, int64_t d, Real eps, Real* yd,
                    Tensor& mean, Tensor& rstd) {
#pragma omp parallel if (rows > 1 && rows * d >= kNormParallelMinElements)
  {
    Array xr(d);  // aligned copy of the row
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      xr = ConstArrayMap(xd + r * d, d);
      ArrayMap yr(yd + r * d, d);
      // Two passes (mean, then centred squares): biased variance as torch, and
      // no cancellation when |mean| >> std.
      const Real mu = xr.sum() / static_cast<Real>(d);
      const Real var = (xr - mu).square().sum() / static_cast<Real>(d);
      const Real rs = Real(1) / std::sqrt(var + eps);
      mean[r] = mu;
      rstd[r] = rs;
      yr = (xr - mu) * rs;
      if (w) yr *= ConstArrayMap(w, d);
      if (b) yr += ConstArrayMap(b, d);
    }
  }
}

// The backward of layer_norm: the inputs' gradients from the output's, with the
// forward's mean and rstd (rows,); weight and bias are inputs w_index and b_index (-1: none).
void layer_norm_backward(Node& self, int64_t d, int64_t rows, int w_index, int b_index, const Tensor& mean,
                         const Tensor& rstd) {
  const bool need_x = self.input_needs_grad(0);
  const bool need_w = w_index >= 0 && self.input_needs_grad(w_index);
  const bool need_b = b_index >= 0 && self.input_needs_grad(b_index);
  const Real* xd = self.input_value(0).data();
  const Real* w = w_index >= 0 ? self.input_value(w_index).data() : nullptr;
  const Real* dy = self.grad.data();
  Real* dx = need_x ? self.input_grad(0).data() : nullptr;

  const int64_t chunks = std::min<int64_t>(kGradChunks, std::max<int64_t>(rows, 1));
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  // Partial weight/bias gradients of each chunk: (chunks, d) each.
  Eigen::Array<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> dw_part, db_part;
  if (need_w) dw_part.setZero(chunks, d);
  if (need_b) db_part.setZero(chunks, d);

#pragma omp parallel if (rows > 1 && rows * d >= kNormParallelMinElements)
  {
    Array xhat(d), dxhat(d);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t r_end = std::min(rows, (c + 1) * per_chunk);
      for (int64_t r = c * per_chunk; r < r_end; ++r) {
        ConstArrayMap xr(xd + r * d, d), dyr(dy + r * d, d);
        xhat = (xr - mean[r]) * rstd[r];
        if (need_w) dw_part.row(c) += (dyr * xhat).transpose();
        if (need_b) db_part.row(c) += dyr.transpose();
        if (!need_x) continue;
        // y = x_hat * w + b; x_hat = (x - mean) * rstd. With g = dy * w:
        // dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)).
        if (w)
          dxhat = dyr * ConstArrayMap(w, d);
        else
          dxhat = dyr;
        const Real mean_g = dxhat.sum() / static_cast<Real>(d);
        const Real mean_gx = (dxhat * xhat).sum() / static_cast<Real>(d);
        ArrayMap(dx + r * d, d) += rstd[r] * (dxhat - mean_g - xhat * mean_gx);
      }
    }
  }
  if (need_w) ArrayMap(self.input_grad(w_index).data(), d) += dw_part.colwise().sum().transpose();
  if (need_b) ArrayMap(self.input_grad(b_index).data(), d) += db_part.colwise().sum().transpose();
}

// layer_norm_backward's formulas in differentiable ops (second order), on the
// op's own inputs (no composed forward, no nested grad_graph): with
// σ = sqrt(var + eps), x̂ = (x − mean) / σ and g = dy · w, over the last axis,
//   dx = (g − mean(g) − x̂ · mean(g · x̂)) / σ   (one fused op, layer_norm_input_grad),
//   dw = Σ_rows dy · x̂   (x̂ the fused layer_norm without affine terms),  db = Σ_rows dy.
std::vector<Var> layer_norm_graph_grads(const std::vector<Var>& in, int w_index, int b_index, Real eps,
                                        const Var& dy) {
  const Var& x = in[0];
  std::vector<Var> grads(in.size());
  if (x.requires_grad())
    grads[0] = layer_norm_input_grad(x, w_index >= 0 ? mul(dy, in[static_cast<size_t>(w_index)]) : dy, eps);
  if (w_index >= 0 && in[static_cast<size_t>(w_index)].requires_grad())
    grads[static_cast<size_t>(w_index)] =
        sum_to(mul(dy, layer_norm(x, Var(), Var(), eps)), in[static_cast<size_t>(w_index)].shape());
  if (b_index >= 0 && in[static_cast<size_t>(b_index)].requires_grad())
    grads[static_cast<size_t>(b_index)] = sum_to(dy, in[static_cast<size_t>(b_index)].shape());
  return grads;
}

}  // namespace

Var layer_norm(const Var& x, const Var& weight, const Var& bias, Real eps) {
  if (x.dim() < 1) throw ShapeError("layer_norm: input needs at least 1 dim, got " + x.value().shape_str());
  if (!(eps >= 0)) throw ValueError("layer_norm: eps must be >= 0, got " + std::to_string(eps));
  const int64_t d = x.size(-1);
  check_affine(weight, d, x.shape(), "weight");
  check_affine(bias, d, x.shape(), "bias");
  const int64_t rows = d ? x.numel() / d : 0;

  Tensor out = Tensor::uninitialized(x.shape());
  Tensor mean({rows}), rstd({rows});
  normalize_rows(x.value().data(), weight.defined() ? weight.value().data() : nullptr,
                 bias.defined() ? bias.value().data() : nullptr, rows, d, eps, out.data(), mean, rstd);

  std::vector<Var> inputs{x};
  const int w_index = weight.defined() ? static_cast<int>(inputs.size()) : -1;
  if (weight.defined()) inputs.push_back(weight);
  const int b_index = bias.defined() ? static_cast<int>(inputs.size()) : -1;
  if (bias.defined()) inputs.push_back(bias);
  Var r = make_result(std::move(out), std::move(inputs), "layer_norm",
                      [d, rows, w_index, b_index, mean = std::move(mean), rstd = std::move(rstd)](Node& self) {
                        layer_norm_backward(self, d, rows, w_index, b_index, mean, rstd);
                      },
                      ValueReads{false, ~0u});  // x and weight, not the output
  if (records_second_order(r))
    r.node()->graph_backward = [w_index, b_index, eps](const std::vector<Var>& in, const Var&, const Var& dy) {
      return layer_norm_graph_grads(in, w_index, b_index, eps, dy);
    };
  return r;
}

}  // namespace attnlab
