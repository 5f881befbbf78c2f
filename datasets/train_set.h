#pragma once
// A fixed training set (`attnlab train --train-size N`): N examples with
// distinct inputs, drawn once, and the batches that walk through them.
//
// Batches take the next batch_size examples of an endless sequence made of
// the set's epochs one after another, so a batch may straddle two epochs.
// An epoch is the whole set in one order:
//   shuffled: epoch e's order is a Fisher-Yates permutation drawn with
//             Rng(derive_seed(order_seed, e)) (minibatch SGD, reshuffled
//             every epoch);
//   not shuffled: the draw order, every epoch. With batch_size = N every
//             batch is then the whole set in the same order: full-batch
//             gradient descent, the same batch bit for bit at every step.
// The state is the count of examples handed out (the epoch and the position
// in it follow), so a resumed run continues exactly.
#include <cstdint>
#include <string>
#include <vector>

#include "datasets/splits.h"

namespace attnlab {

class TrainSet {
 public:
  // `examples`: the set, in its draw order (at least one).
  TrainSet(std::vector<Example> examples, uint64_t order_seed, bool shuffle);

  // The next batch_size examples; ValueError for batch_size < 1.
  std::vector<Example> next_batch(int64_t batch_size);

  const std::vector<Example>& examples() const { return examples_; }
  int64_t size() const { return static_cast<int64_t>(examples_.size()); }
  bool shuffled() const { return shuffle_; }
  int64_t taken() const { return taken_; }               // examples handed out
  int64_t epoch() const { return taken_ / size(); }      // whole passes completed
  // The set's index of the example at `position` of epoch `epoch`.
  int64_t index_at(int64_t epoch, int64_t position);

  // "set TAKEN", to resume a run exactly.
  std::string state() const;
  void set_state(const std::string& s);  // ValueError on a malformed state

 private:
  std::vector<Example> examples_;
  uint64_t order_seed_;
  bool shuffle_;
  std::vector<int64_t> order_;  // epoch order_epoch_'s permutation of the set's indices (shuffled only)
  int64_t order_epoch_ = -1;
  int64_t taken_ = 0;
};

// n examples with distinct inputs from `stream` (which never returns a
// held-out input), in the order they were first drawn; a repeated input is
// drawn again. ValueError for n < 1, or when n distinct inputs are not found
// within 100 n + 100000 draws.
std::vector<Example> draw_distinct(TrainStream& stream, int64_t n, const std::string& task_name);

}  // namespace attnlab
