#pragma once
// Accuracy of a model: teacher-forced on a training batch (from its logits)
// and by greedy decoding on held-out examples.
#include <cstdint>
#include <vector>

#include "datasets/task.h"
#include "models/sequence_model.h"

namespace attnlab::cli {

struct Accuracy {
  double token = 0;  // fraction of target tokens right
  double exact = 0;  // fraction of sequences entirely right
  int64_t sequences = 0;
};

// From logits (B, T, V) and targets (B, T) (-100 = ignored).
Accuracy teacher_forced_accuracy(const Tensor& logits, const IntTensor& targets);

// Greedy decoding of every example's input, compared with its output
// position by position (a missing or extra token counts as wrong; the
// encoder tagger's outputs beyond the expected length are not targets).
// `predictions`, if given, receives the decoded outputs.
Accuracy greedy_accuracy(SequenceModel& model, const std::vector<Example>& examples, int64_t batch_size,
                         std::vector<std::vector<int32_t>>* predictions = nullptr);

// A language model's teacher-forced score on held-out windows (format "lm").
struct LmScore {
  double loss = 0;            // mean cross-entropy per predicted token, nats
  double bits_per_token = 0;  // loss / ln 2 (bits per character for the text task)
  double token = 0;           // fraction of next tokens predicted right (argmax)
  int64_t tokens = 0;         // tokens predicted
};
LmScore lm_score(SequenceModel& model, const std::vector<Example>& windows, int64_t batch_size);

}  // namespace attnlab::cli
