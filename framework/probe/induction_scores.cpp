#include "framework/probe/induction_scores.h"

#include <string>

#include "framework/error.h"

namespace attnlab {

std::vector<InductionScores> induction_scores(const Tensor& weights, int64_t first, int64_t n) {
  if (n < 1 || first < 0)
    throw ValueError("induction_scores: expected n >= 1 and first >= 0, got n = " + std::to_string(n) +
                     ", first = " + std::to_string(first));
  if (weights.dim() != 4 || weights.size(2) != weights.size(3) || weights.size(2) < first + 2 * n)
    throw ShapeError("induction_scores: expected weights (B, h, T, T) with T >= first + 2n = " +
                     std::to_string(first + 2 * n) + ", got " + shape_str(weights.shape()));
  const int64_t B = weights.size(0), h = weights.size(1), T = weights.size(2);
  std::vector<InductionScores> out(static_cast<size_t>(h));
  for (int64_t head = 0; head < h; ++head) {
    double prefix = 0, previous = 0;
    for (int64_t b = 0; b < B; ++b) {
      const Real* w = weights.data() + (b * h + head) * T * T;  // (T, T), row i = query i
      for (int64_t i = first + n; i < first + 2 * n; ++i) prefix += w[i * T + i - n + 1];
      for (int64_t i = 1; i < T; ++i) previous += w[i * T + i - 1];
    }
    InductionScores& s = out[static_cast<size_t>(head)];
    s.head = head;
    s.prefix_matching = B > 0 ? prefix / static_cast<double>(B * n) : 0;
    s.previous_token = B > 0 && T > 1 ? previous / static_cast<double>(B * (T - 1)) : 0;
  }
  return out;
}

}  // namespace attnlab
