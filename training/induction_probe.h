#pragma once
// The induction probe of a training run (--probe-induction N): after the
// update of step 1 and of every N-th step, each self-attention head's
// prefix-matching and previous-token scores (framework/probe/induction_scores.h)
// into probe_induction.csv, a row per step, layer and head:
//   step,layer,head,prefix_matching,previous_token     (layer: "blocks.0.attn")
// The scores are read from the patterns of one forward pass over a fixed
// batch of kInductionSequences sequences, each `first` leading tokens
// (a decoder's [bos]; none for --layout bare and text) then n distinct
// random task symbols (ids 4 .. V-1) and the same n again, drawn once from
// derive_seed(seed, kInductionStream): a resumed run probes the same batch.
// The pass runs without a graph, in eval mode (no dropout) and in fp32
// (training/probe_mode.h), with observers on the seam only while it runs, so
// training's weights, data and random streams stay bitwise an unprobed run's.
// Decoder-only models only: an encoder's attention is not causal, and a
// seq2seq decoder reads its answer, not the sequence.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "framework/io/csv.h"
#include "framework/io/tfevents.h"
#include "models/batch.h"

namespace attnlab {

class Task;
class TrainState;
class MultiHeadAttention;

constexpr int64_t kInductionSequences = 16;
constexpr int64_t kInductionMaxHalf = 32;

// Where the probe's sequences put the repeated symbols.
struct InductionLayout {
  int64_t first = 0;  // leading tokens: 1 ([bos]) for a decoder's special layout, 0 for bare and lm
  // symbols per copy: min(kInductionMaxHalf, the task's symbols, ⌊(L - first) / 2⌋),
  // L the longest sequence the model reads in training (needed_positions), so
  // that the probe stays within the positions training taught it
  int64_t n = 0;
};
// ValueError for a model that is not a decoder (naming --model) or room for
// fewer than 2 symbols a copy.
InductionLayout induction_layout(const Task& task, const TransformerConfig& model);

// The probe's batch: kInductionSequences rows of first + 2n token ids, no padding.
ModelInput induction_batch(const InductionLayout& layout, int64_t vocab_size, uint64_t seed);

class TrainingInduction {
 public:
  // resume_step >= 0: appends to the run's CSV, dropping rows after that step.
  // ValueError as induction_layout; IoError when the CSV cannot be written.
  TrainingInduction(TrainState& state, const std::string& dir, int64_t resume_step);

  bool due(int64_t step) const { return step == 1 || step % every_ == 0; }
  // The rows of `step` (after its update). IoError when the CSV cannot be written.
  void record(int64_t step);

  // Each recorded score also goes to `events` (null: none) as a TensorBoard
  // scalar prefix_matching/LAYER/headH and previous_token/LAYER/headH; it must
  // outlive the probe.
  void set_events(TfEventsWriter* events) { events_ = events; }

  static const std::vector<std::string>& columns();
  const InductionLayout& layout() const { return layout_; }

 private:
  TrainState& state_;
  int64_t every_;
  InductionLayout layout_;
  ModelInput batch_;
  std::vector<std::pair<std::string, MultiHeadAttention*>> attention_;
  CsvWriter csv_;
  TfEventsWriter* events_ = nullptr;
};

}  // namespace attnlab
