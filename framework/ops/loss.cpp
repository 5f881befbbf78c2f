// Fused log-softmax + cross-entropy (mean over the non-ignored positions):
// forward and backward. Nothing of size (N, V) is cached: backward recomputes
// the softmax of each row from the logits, which costs one exp pass and saves
// writing and re-reading a probability tensor.
#include "framework/ops/loss.h"

#include "framework/ops/elementwise.h"
#include "framework/ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/ops/softmax.h"

namespace attnlab {
namespace {

using ArrayMap = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;
using ConstArrayMap = Eigen::Map<const Eigen::Array<Real, Eigen::Dynamic, 1>>;

void check_inputs(const Var& logits, const IntTensor& targets, const CrossEntropyOptions& options) {
  if (logits.dim() < 1)
    throw ShapeError("cross_entropy: logits need at least 1 dim (..., V), got " + logits.value().shape_str());
  const Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape != expected)
    throw ShapeError("cross_entropy: targets must have shape " + shape_str(expected) + " for logits " +
                     logits.value().shape_str() + ", got " + shape_str(targets.shape));
  if (!(options.label_smoothing >= 0 && options.label_smoothing <= 1))
    throw ValueError("cross_entropy: label_smoothing must lie in [0, 1], got " +
                     std::to_string(options.label_smoothing));
  const int64_t V = logits.size(-1);
  for (int64_t i = 0; i < targets.numel(); ++i) {
    const int32_t t = targets.data[static_cast<size_t>(i)];
    if (t == options.ignore_index) continue;
    if (t < 0 || t >= V)
      throw ValueError("cross_entropy: target " + std::to_string(t) + " at position " + std::to_string(i) +
                       " is outside [0, V) for V = " + std::to_string(V) + " (ignore_index " +
                       std::to_string(options.ignore_index) + ")");
  }
}

}  // namespace

namespace {

// The loss's backward in differentiable ops (second order): g / count times
// (softmax(logits) - the smoothed one-hot) on the rows not ignored, 0 on the others.
Var cross_entropy_graph_grad(const Var& logits, const IntTensor& targets, int32_t ignore, Real eps, int64_t count,
                             const Var& g) {
  const int64_t V = logits.size(-1), rows = targets.numel();
  Tensor smoothed(logits.shape()), kept(logits.shape());  // (..., V)
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets.data[static_cast<size_t>(r)];
    if (t == ignore) continue;
    for (int64_t j = 0; j < V; ++j) {
      smoothed[r * V + j] = eps / static_cast<Real>(V) + (j == t ? 1 - eps : Real(0));
      kept[r * V + j] = 1;
    }
  }
  const Real per_row = count ? Real(1) / static_cast<Real>(count) : Real(0);
  return mul(scale(g, per_row), mul(sub(softmax(logits), Var(std::move(smoothed))), Var(std::move(kept))));
}

void attach_graph_grad(Var& r, const IntTensor& targets, int32_t ignore, Real eps, int64_t count) {
  r.node()->graph_backward = [targets, ignore, eps, count](const std::vector<Var>& in, const Var&, const Var& g) {
    return std::vector<Var>{cross_entropy_graph_grad(in[0], targets, ignore, eps, count, g)};
  };
}

}  // namespace

Var cross_entropy(const Var& logits, const IntTensor& targets, const CrossEntropyOptions& options) {
  check_inputs(logits, targets, options);
  const int64_t V = logits.size(-1);
  const int64_t rows = targets.numel();
  const int32_t ignore = options.ignore_index;
  const Real eps = options.label_smoothing;

  int64_t count = 0;
  for (int32_t t : targets.data) count += t != ignore;

  // Per-row losses, summed afterwards in row order so the total does not
  // depend on the thread count.
  std::vector<double> row_loss(static_cast<size_t>(rows), 0.0);
  const Real* x = logits.value().data();
#pragma omp parallel if (softmax_rows_worth_parallel(rows, V))
  {
    Eigen::Array<Real, Eigen::Dynamic, 1> logp(V);  // aligned: its sum does not depend on an address
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t t = targets.data[static_cast<size_t>(r)];
      if (t == ignore) continue;
      log_softmax_row(x + r * V, logp.data(), V);
      // torch: (1 - eps) * nll + eps * mean over classes of -log p.
      double loss = -(1 - eps) * static_cast<double>(logp[t]);
      if (eps > 0) loss -= eps * static_cast<double>(logp.sum()) / static_cast<double>(V);
      row_loss[static_cast<size_t>(r)] = loss;
    }
  }
  double total = 0;
  for (double l : row_loss) total += l;
  // All positions ignored: a defined loss of 0 with zero gradient (see loss.h).
  const Real value = count ? static_cast<Real>(total / static_cast<double>(count)) : Real(0);

  Var r = make_result(
      Tensor::from({}, {value}), {logits}, "cross_entropy",
      [V, rows, count, ignore, eps, targets = targets.data](Node& self) {
        if (!self.input_needs_grad(0)) return;
        Real* dx = self.input_grad(0).data();  // allocated (zeros) even when count == 0
        if (count == 0) return;
        // d loss / d logits = (softmax - smoothed one-hot) / count, smoothed
        // one-hot = (1 - eps) * onehot + eps / V.
        const Real g = self.grad[0] / static_cast<Real>(count);
        const Real* x = self.input_value(0).data();
#pragma omp parallel if (softmax_rows_worth_parallel(rows, V))
        {
          std::vector<Real> p(static_cast<size_t>(V));
#pragma omp for schedule(static)
          for (int64_t r = 0; r < rows; ++r) {
            const int32_t t = targets[static_cast<size_t>(r)];
            if (t == ignore) continue;
            softmax_row(x + r * V, p.data(), V);
            ArrayMap dxr(dx + r * V, V);
            dxr += g * (ConstArrayMap(p.data(), V) - eps / static_cast<Real>(V));
            dxr[t] -= g * (1 - eps);
          }
        }
      });
  if (records_second_order(r)) attach_graph_grad(r, targets, ignore, eps, count);
  return r;
}

RowScore score_row(const Real* row, int64_t V, int32_t y) {
  const Real* top = std::max_element(row, row + V);  // the first maximum
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - static_cast<double>(*top));
  return {std::log(sum) + static_cast<double>(*top) - static_cast<double>(row[y]), top - row == y};
}

}  // namespace attnlab
