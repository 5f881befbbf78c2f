#pragma once
// A set of examples as teacher-forced batches, and its score from the logits:
// what every intervention runs once per component (forward only, no decoding).
//
// Exact match here is "every target token is the argmax": for the encoder
// tagger, and for a decoder or seq2seq whose targets end with <eos>, that is
// exactly greedy decoding's exact match (greedy reads the same prefixes as
// long as it is right, and stops at the <eos> it predicts); token accuracy is
// teacher-forced (each answer token given the right ones before it).
#include <cstdint>
#include <limits>
#include <vector>

#include "datasets/task.h"
#include "models/batch.h"

namespace attnlab {

struct TeacherForcedSet {
  BatchFormat format = BatchFormat::encoder;
  std::vector<FormattedBatch> batches;  // the examples in order, `batch_size` a batch (the last may be short)
  std::vector<size_t> first;            // the index of each batch's first example
  size_t examples = 0;
  // A language model's windows as the in-context loss splits them, one per
  // example (Task::in_context_split); empty for other sets.
  std::vector<ContextSplit> splits;
};

// The examples laid out as a model of `config` trains on them
// (batch_format(config, language_model)); with a language model's `task`,
// each window's in-context split too. ValueError for an empty set or a
// batch_size < 1.
TeacherForcedSet teacher_forced_set(const TransformerConfig& config, bool language_model,
                                    const std::vector<Example>& examples, int64_t batch_size,
                                    const Task* task = nullptr);

// A set's figures: mean cross-entropy per target token (nats), token accuracy,
// and exact match (0 for a language model, which is scored per token); with
// splits, the in-context loss (the late targets' mean loss less the early
// ones') and the late targets' accuracy, NaN otherwise (training/evaluate.h
// computes the same for a held-out evaluation).
struct SetScore {
  double loss = 0, token = 0, exact = 0;
  int64_t sequences = 0, tokens = 0;
  double in_context_loss = std::numeric_limits<double>::quiet_NaN();
  double late_token = std::numeric_limits<double>::quiet_NaN();
};

// Sums of the figures over batches, in the order they are added (doubles, so
// the order is fixed for a fixed result).
class ScoreSums {
 public:
  // logits (B, T, V) against targets (B, T), -100 ignored; `splits`: the
  // in-context split of each of the B rows, or null.
  void add(const Tensor& logits, const IntTensor& targets, const ContextSplit* splits = nullptr);
  SetScore score() const;

 private:
  double loss_ = 0, early_loss_ = 0, late_loss_ = 0;
  int64_t right_ = 0, tokens_ = 0, exact_ = 0, sequences_ = 0, early_ = 0, late_ = 0, late_right_ = 0;
};

// The splits of batch `b` of `set` for ScoreSums::add, or null.
const ContextSplit* batch_splits(const TeacherForcedSet& set, size_t b);

// Every batch through model.forward in eval mode without a graph (whatever
// hooks are set apply), scored.
SetScore score_set(SequenceModel& model, const TeacherForcedSet& set);

}  // namespace attnlab
