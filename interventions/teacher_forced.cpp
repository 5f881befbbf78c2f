#include "interventions/teacher_forced.h"

#include <algorithm>
#include <cmath>

#include "framework/error.h"
#include "framework/ops/loss.h"

namespace attnlab {

TeacherForcedSet teacher_forced_set(const TransformerConfig& config, bool language_model,
                                    const std::vector<Example>& examples, int64_t batch_size, const Task* task) {
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
  if (language_model && task)
    for (const Example& e : examples) set.splits.push_back(task->in_context_split(static_cast<int64_t>(e.output.size())));
  return set;
}

const ContextSplit* batch_splits(const TeacherForcedSet& set, size_t b) {
  return set.splits.empty() ? nullptr : set.splits.data() + set.first[b];
}

void ScoreSums::add(const Tensor& logits, const IntTensor& targets, const ContextSplit* splits) {
  const int64_t V = logits.size(-1), B = targets.shape[0], T = targets.shape[1];
  if (logits.numel() != B * T * V)
    throw ShapeError("logits " + logits.shape_str() + " do not match targets of " + std::to_string(B) + " x " +
                     std::to_string(T));
  for (int64_t b = 0; b < B; ++b) {
    bool all = true;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t y = targets.data[static_cast<size_t>(b * T + t)];
      if (y == kIgnoreTarget) continue;
      const auto [loss, right] = score_row(logits.data() + (b * T + t) * V, V, y);
      loss_ += loss;
      right_ += right;
      if (splits && t < splits[b].early_end) {
        early_loss_ += loss;
        ++early_;
      } else if (splits && t >= splits[b].late_begin) {
        late_loss_ += loss;
        ++late_;
        late_right_ += right;
      }
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
  if (early_ && late_) {
    s.in_context_loss = late_loss_ / static_cast<double>(late_) - early_loss_ / static_cast<double>(early_);
    s.late_token = static_cast<double>(late_right_) / static_cast<double>(late_);
  }
  return s;
}

SetScore score_set(SequenceModel& model, const TeacherForcedSet& set) {
  InferenceGuard guard(model);
  ScoreSums sums;
  for (size_t b = 0; b < set.batches.size(); ++b)
    sums.add(model.forward(set.batches[b].input).value(), set.batches[b].targets, batch_splits(set, b));
  SetScore s = sums.score();
  if (set.format == BatchFormat::lm) s.exact = 0;
  return s;
}

}  // namespace attnlab
