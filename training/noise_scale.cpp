#include "training/noise_scale.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "framework/error.h"

namespace attnlab {

NoiseEstimates noise_estimates(double small_sq, double big_sq, double b_small, double b_big) {
  if (!(b_small > 0 && b_big > b_small))
    throw std::logic_error("noise_estimates: needs 0 < B_small < B_big, not " + std::to_string(b_small) + " and " +
                           std::to_string(b_big));
  NoiseEstimates out;
  out.grad_sq = (b_big * big_sq - b_small * small_sq) / (b_big - b_small);
  out.trace = (small_sq - big_sq) / (1 / b_small - 1 / b_big);
  return out;
}

double squared_gradient_norm(const std::vector<Var>& params) {
  double sum = 0;
  for (const Var& p : params) {
    if (!p.has_grad()) continue;
    const Real* g = p.grad().data();
    for (int64_t i = 0; i < p.numel(); ++i) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  }
  return sum;
}

void NoiseScaleEma::add(const std::vector<double>& micro_sq, double grad_norm, int64_t batch_size) {
  const size_t M = micro_sq.size();
  if (M < 2) return;  // no two batch sizes (micro-batches without counted targets are left out)
  double mean = 0;
  for (double sq : micro_sq) mean += sq;  // in micro-batch order
  mean /= static_cast<double>(M);
  const double B = static_cast<double>(batch_size);
  const NoiseEstimates e = noise_estimates(mean, grad_norm * grad_norm, B / static_cast<double>(M), B);
  grad_sq_ = kDecay * grad_sq_ + (1 - kDecay) * e.grad_sq;
  trace_ = kDecay * trace_ + (1 - kDecay) * e.trace;
  ++steps_;
}

double NoiseScaleEma::debiased(double ema) const {
  if (steps_ == 0) return std::numeric_limits<double>::quiet_NaN();
  return ema / (1 - std::pow(kDecay, static_cast<double>(steps_)));
}

double NoiseScaleEma::grad_sq() const { return debiased(grad_sq_); }
double NoiseScaleEma::trace() const { return debiased(trace_); }

std::string NoiseScaleEma::state() const {
  char text[128];  // %a: hexadecimal floating point, read back bit for bit
  std::snprintf(text, sizeof text, "%lld %a %a", static_cast<long long>(steps_), grad_sq_, trace_);
  return text;
}

void NoiseScaleEma::set_state(const std::string& text, const std::string& source) {
  long long steps = 0;
  double grad_sq = 0, trace = 0;
  int end = 0;
  if (std::sscanf(text.c_str(), "%lld %la %la%n", &steps, &grad_sq, &trace, &end) != 3 ||
      static_cast<size_t>(end) != text.size() || steps < 0)
    throw IoError(source + ": malformed noise_scale_ema '" + shortened(text) + "' in its metadata");
  steps_ = steps;
  grad_sq_ = grad_sq;
  trace_ = trace;
}

}  // namespace attnlab
