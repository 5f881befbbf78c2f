#include "framework/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "framework/optim/chunks.h"

namespace attnlab {

namespace {
// Sum of squares in double with 8 independent accumulators: vectorizes, and
// the order of additions is fixed, so the result is the same on every run.
double sum_of_squares(const Real* x, int64_t n) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const double v = static_cast<double>(x[i + j]);
      acc[j] += v * v;
    }
  for (; i < n; ++i) {
    const double v = static_cast<double>(x[i]);
    acc[0] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
}  // namespace

void chunk_square_sums(const Real* x, int64_t n, std::vector<double>& out) {
  for (int64_t begin = 0; begin < n; begin += kOptimChunk)
    out.push_back(sum_of_squares(x + begin, std::min(n, begin + kOptimChunk) - begin));
}

double norm_of(const std::vector<double>& square_sums) {
  double sum_sq = 0;
  for (double s : square_sums) sum_sq += s;
  return std::sqrt(sum_sq);
}

double grad_norm(const std::vector<Var>& params) {
  std::vector<double> sums;
  for (const Var& p : params) {
    if (!p.defined() || !p.has_grad()) continue;
    chunk_square_sums(p.grad().data(), p.grad().numel(), sums);
  }
  return norm_of(sums);
}

double clip_grad_norm(const std::vector<Var>& params, double max_norm) {
  return clip_to_norm(params, grad_norm(params), max_norm);
}

double clip_to_norm(const std::vector<Var>& params, double norm, double max_norm) {
  if (!(max_norm > 0) || !std::isfinite(max_norm))
  {
    std::ostringstream msg;
    msg << "clip_grad_norm: max_norm must be > 0 and finite, got " << max_norm;
    throw ValueError(msg.str());
  }
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1) {
    const Real c = static_cast<Real>(coef);
    for (const Var& p : params) {
      if (!p.defined() || !p.has_grad()) continue;
      Var handle = p;  // Var is a handle; the gradient is shared
      handle.grad().flat() *= c;
    }
  }
  return norm;
}

}  // namespace attnlab
