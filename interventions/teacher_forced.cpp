#include "interventions/teacher_forced.h"

#include <algorithm>
#include <cmath>

#include "framework/error.h"

namespace attnlab {

TeacherForcedSet teacher_forced_set(const TransformerConfig& config, bool language_model,
                                    const std::vector<Example>& examples, int64_t batch_size) {
  if (examples.empty()) throw ValueError("an intervention needs at least one example; the set is empty");
  if (batch_size < 1) throw ValueError("batch size must be >= 1, got " + std::to_string(batch_size));
  TeacherForcedSet set;
  set.format = batch_format(config, language_model);
  set.examples = examples.size();
  for (size_t begin = 0; begin < examples.size(); begin += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(examples.size(), begin + static_cast<size_t>(batch_size));
    TokenPairs pairs;
    for (size_t i = begin; i < end; ++i) pairs.emplace_back(examples[i].input, examples[i].output);
    set.batches.push_back(format_batch(set.format, pairs));
    set.first.push_back(begin);
  }
  return set;
}

void ScoreSums::add(const Tensor& logits, const IntTensor& targets) {
  const int64_t V = logits.size(-1), B = targets.shape[0], T = targets.shape[1];
  if (logits.numel() != B * T * V)
    throw ShapeError("logits " + logits.shape_str() + " do not match targets of " + std::to_string(B) + " x " +
                     std::to_string(T));
  for (int64_t b = 0; b < B; ++b) {
    bool all = true;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t y = targets.data[static_cast<size_t>(b * T + t)];
      if (y == kIgnoreTarget) continue;
      const Real* row = logits.data() + (b * T + t) * V;
      const Real top = *std::max_element(row, row + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
      loss_ += std::log(sum) + top - static_cast<double>(row[y]);
      // The first maximum, as greedy decoding picks it.
      const bool right = std::max_element(row, row + V) - row == y;
      right_ += right;
      all = all && right;
      ++tokens_;
    }
    exact_ += all;
    ++sequences_;
  }
}

SetScore ScoreSums::score() const {
  SetScore s;
  s.sequences = sequences_;
  s.tokens = tokens_;
  if (tokens_) {
    s.loss = loss_ / static_cast<double>(tokens_);
    s.token = static_cast<double>(right_) / static_cast<double>(tokens_);
  }
  if (sequences_) s.exact = static_cast<double>(exact_) / static_cast<double>(sequences_);
  return s;
}

SetScore score_set(SequenceModel& model, const TeacherForcedSet& set) {
  InferenceGuard guard(model);
  ScoreSums sums;
  for (const FormattedBatch& batch : set.batches) sums.add(model.forward(batch.input).value(), batch.targets);
  SetScore s = sums.score();
  if (set.format == BatchFormat::lm) s.exact = 0;
  return s;
}

}  // namespace attnlab
