#include "interventions/ablation_budget.h"

#include <algorithm>

#include "interventions/components.h"

namespace attnlab {

double forward_flops_per_token(const SequenceModel& model) {
  double parameters = 0;
  for (const auto& [name, p] : model.named_parameters()) parameters += static_cast<double>(p.value().numel());
  return 2 * parameters;
}

size_t examples_within(const SequenceModel& model, const std::vector<Example>& examples, double flops,
                       size_t minimum) {
  const double per_token = forward_flops_per_token(model);
  const double passes = static_cast<double>(model_components(model.config()).size() + 1);
  size_t n = 0;
  for (double spent = 0; n < examples.size(); ++n) {
    spent += passes * per_token * static_cast<double>(examples[n].input.size() + examples[n].output.size() + 2);
    if (spent > flops) break;
  }
  return std::min(examples.size(), std::max(minimum, n));
}

}  // namespace attnlab
