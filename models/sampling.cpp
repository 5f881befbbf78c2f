#include "models/sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnlab {

TokenChooser token_sampler(double temperature, int64_t top_k, Rng& rng) {
  return [temperature, top_k, &rng](const Real* logits, int64_t V) {
    std::vector<int32_t> order;
    for (int32_t i = SpecialTokens::count; i < V; ++i) order.push_back(i);
    std::sort(order.begin(), order.end(), [logits](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);  // ties by id: deterministic
    });
    if (temperature == 0) return order[0];
    if (top_k > 0 && static_cast<size_t>(top_k) < order.size()) order.resize(static_cast<size_t>(top_k));
    std::vector<double> weights(order.size());
    const double top = logits[order[0]];
    double total = 0;
    for (size_t i = 0; i < order.size(); ++i) total += weights[i] = std::exp((logits[order[i]] - top) / temperature);
    double u = rng.uniform() * total;
    for (size_t i = 0; i < order.size(); ++i) {
      u -= weights[i];
      if (u < 0) return order[i];
    }
    return order.back();  // u landed on the rounding error at the end
  };
}

}  // namespace attnlab
