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
#include <vector>

#include "datasets/task.h"
#include "models/batch.h"

namespace attnlab {

struct TeacherForcedSet {
  BatchFormat format = BatchFormat::encoder;
  std::vector<FormattedBatch> batches;  // the examples in order, `batch_size` a batch (the last may be short)
  std::vector<size_t> first;            // the index of each batch's first example
  size_t examples = 0;
};

// The examples laid out as a model of `config` trains on them
// (batch_format(config, language_model)); ValueError for an empty set or a
// batch_size < 1.
TeacherForcedSet teacher_forced_set(const TransformerConfig& config, bool language_model,
                                    const std::vector<Example>& examples, int64_t batch_size);

// A set's figures: mean cross-entropy per target token (nats), token accuracy,
// and exact match (0 for a language model, which is scored per token).
struct SetScore {
  double loss = 0, token = 0, exact = 0;
  int64_t sequences = 0, tokens = 0;
};

// Sums of the figures over batches, in the order they are added (doubles, so
// the order is fixed for a fixed result).
class ScoreSums {
 public:
  // logits (B, T, V) against targets (B, T), -100 ignored.
  void add(const Tensor& logits, const IntTensor& targets);
  SetScore score() const;

 private:
  double loss_ = 0;
  int64_t right_ = 0, tokens_ = 0, exact_ = 0, sequences_ = 0;
};

// Every batch through model.forward in eval mode without a graph (whatever
// hooks are set apply), scored.
SetScore score_set(SequenceModel& model, const TeacherForcedSet& set);

}  // namespace attnlab
