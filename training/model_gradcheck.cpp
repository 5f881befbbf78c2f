#include "training/model_gradcheck.h"

#include <algorithm>
#include <cmath>

#include "framework/ops/loss.h"

namespace attnlab {

namespace {

// Mean cross-entropy over the targets that are not ignored, in double.
double loss_in_double(const Tensor& logits, const IntTensor& targets) {
  const int64_t V = logits.size(-1), rows = logits.numel() / V;
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets.data[static_cast<size_t>(r)];
    if (t == kIgnoreTarget) continue;
    const Real* x = logits.data() + r * V;
    double m = x[0];
    for (int64_t j = 1; j < V; ++j) m = std::max(m, static_cast<double>(x[j]));
    double s = 0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(static_cast<double>(x[j]) - m);
    total += m + std::log(s) - static_cast<double>(x[t]);
    ++counted;
  }
  return counted > 0 ? total / static_cast<double>(counted) : 0.0;
}

// Up to n distinct indices in [0, size), in increasing order.
std::vector<int64_t> sample_indices(int64_t size, int64_t n, Rng& rng) {
  std::vector<int64_t> idx(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) idx[static_cast<size_t>(i)] = i;
  if (n >= size) return idx;
  for (int64_t i = 0; i < n; ++i) std::swap(idx[static_cast<size_t>(i)], idx[static_cast<size_t>(rng.integer(i, size - 1))]);
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// What one element's check needs: the loss at the current weights, its value
// there, its float32 noise level and the absolute floor.
struct Probe {
  std::function<double()> loss_at;
  double l_zero = 0, noise_level = 0, atol = 0;
  const ModelGradcheckOptions* options = nullptr;
  double denominator(double a, double n) const { return std::max({std::abs(a), std::abs(n), atol, 1e-300}); }
};

// Element i of v against central differences; updates the tensor's figures.
void check_element(Var& v, int64_t i, const Probe& p, TensorGradcheck& r) {
  const double analytic = v.has_grad() ? static_cast<double>(v.grad()[i]) : 0.0;
  const Real w = v.value()[i];
  const double tol = p.options->tol;
  double h = p.options->eps, excess = 0, err = 0;
  for (int attempt = 0; attempt < 3; ++attempt, h /= 4) {
    const Real plus = static_cast<Real>(w + h), minus = static_cast<Real>(w - h);
    v.value()[i] = plus;
    const double l_plus = p.loss_at();
    v.value()[i] = minus;
    const double l_minus = p.loss_at();
    v.value()[i] = w;
    const double central = (l_plus - l_minus) / (static_cast<double>(plus) - static_cast<double>(minus));
    const double forward = (l_plus - p.l_zero) / (static_cast<double>(plus) - static_cast<double>(w));
    const double backward = (p.l_zero - l_minus) / (static_cast<double>(w) - static_cast<double>(minus));
    const double noise = p.noise_level / h;
    err = std::abs(analytic - central);
    excess = std::max(0.0, err - noise) / p.denominator(analytic, central);
    // A kink (ReLU) inside the step: the one-sided slopes disagree by more
    // than smooth curvature and noise explain. Retry with a shorter step,
    // which a kink at a fixed distance eventually leaves.
    const bool kink = std::abs(forward - backward) > tol * p.denominator(analytic, central) + 4 * noise;
    if (excess <= tol || !kink) break;
    if (attempt == 0) ++r.kinks;
  }
  r.max_abs_grad = std::max(r.max_abs_grad, std::abs(analytic));
  r.max_abs_err = std::max(r.max_abs_err, err);
  r.max_rel_err = std::max(r.max_rel_err, excess);
  ++r.checked;
}

}  // namespace

ModelGradcheck check_model_gradients(SequenceModel& model, const FormattedBatch& batch,
                                     const ModelGradcheckOptions& options, Rng& rng) {
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  model.zero_grad();
  backward(cross_entropy(model.forward(batch.input), batch.targets, ce));
  if (options.after_backward) options.after_backward(model);

  NoGradGuard no_grad;
  Probe p;
  p.options = &options;
  p.loss_at = [&] { return loss_in_double(model.forward(batch.input).value(), batch.targets); };
  p.l_zero = p.loss_at();
  // Float32 rounding of the forward pass moves the loss by about half an ulp
  // of its value (2^-24 |L|, measured: the differences of a smooth model stay
  // within a third of this), so a difference quotient over a step h carries
  // noise up to ~2^-24 |L| / h; errors below that are not counted.
  p.noise_level = std::ldexp(std::max(1.0, std::abs(p.l_zero)), -24);
  const auto params = model.named_parameters();
  double largest = 0;
  for (const auto& [name, v] : params)
    if (v.has_grad()) largest = std::max(largest, static_cast<double>(v.grad().flat().cwiseAbs().maxCoeff()));
  p.atol = options.atol_frac * largest;

  ModelGradcheck out;
  out.atol = p.atol;
  for (const auto& [name, param] : params) {
    Var v = param;
    TensorGradcheck r;
    r.name = name;
    for (int64_t i : sample_indices(v.numel(), options.samples, rng)) check_element(v, i, p, r);
    r.ok = r.max_rel_err <= options.tol;
    out.ok = out.ok && r.ok;
    out.tensors.push_back(r);
  }
  return out;
}

}  // namespace attnlab
