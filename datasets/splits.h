#pragma once
// Held-out evaluation set and a training stream disjoint from it.
//
// The held-out set is a fixed number of DISTINCT examples drawn from its own
// seed. The training stream draws from another seed and rejects every example
// whose input is in the held-out set, so the two never share an input, by
// construction (checked exactly on the token sequence, not on a hash alone).
//
// Tiny spaces: the held-out size is capped by the number of distinct inputs
// that exist (Task::input_space_size(); e.g. vocab 2, length 2 has only 4).
// If the held-out set takes every input, no training example is left and
// TrainStream's constructor throws a ValueError saying so.
//
// Length generalisation (`eval --len N`): build the task from
// with_length(config, N) and draw a held-out set from it. Lengths outside the
// training range cannot occur in training at all; for N inside the range use
// the regular held-out set, which is the one the training stream avoids.
//
// Seeds: derive_seed(config.seed, kHeldoutStream) and
// derive_seed(config.seed, kTrainStream) give the two independent seeds from
// one data seed.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "datasets/task.h"
#include "framework/random.h"

namespace attnlab {

constexpr uint64_t kHeldoutStream = 1;
constexpr uint64_t kTrainStream = 2;
// A well-mixed seed for sub-stream `stream` of `base` (splitmix64 of both).
uint64_t derive_seed(uint64_t base, uint64_t stream);

// The task config with inputs of exactly n tokens: min_len = max_len = n; for
// add (fixed-length inputs) n is the number of digits per operand instead.
TaskConfig with_length(TaskConfig config, int64_t n);

struct InputHash {
  size_t operator()(const std::vector<int32_t>& ids) const;
};
using InputSet = std::unordered_set<std::vector<int32_t>, InputHash>;

class HeldOut {
 public:
  HeldOut() : inputs_(std::make_shared<InputSet>()) {}
  const std::vector<Example>& examples() const { return examples_; }
  int64_t size() const { return static_cast<int64_t>(examples_.size()); }
  int64_t requested() const { return requested_; }  // n asked for; size() may be smaller (tiny spaces)
  bool contains(const std::vector<int32_t>& input) const { return inputs_->count(input) > 0; }
  std::shared_ptr<const InputSet> inputs() const { return inputs_; }

 private:
  friend HeldOut make_heldout(const Task& task, int64_t n, uint64_t seed);
  std::vector<Example> examples_;  // in draw order
  std::shared_ptr<InputSet> inputs_;  // shared so a TrainStream may outlive its HeldOut
  int64_t requested_ = 0;
};

// min(n, task.input_space_size()) distinct examples drawn with Rng(seed).
// ValueError for n < 0, or when the distinct inputs cannot be found within a
// bounded number of draws (a space whose inputs are very unevenly likely,
// asked for nearly all of them).
HeldOut make_heldout(const Task& task, int64_t n, uint64_t seed);

// Training examples from Rng(seed), never one whose input is held out.
// Keeps a reference to `task` (which must outlive the stream) and shares the
// held-out input set.
class TrainStream {
 public:
  // ValueError when the held-out set leaves no input to train on.
  TrainStream(const Task& task, const HeldOut& heldout, uint64_t seed);

  Example next();
  std::vector<Example> next_batch(int64_t batch_size);

  int64_t drawn() const { return drawn_; }        // examples returned
  int64_t rejected() const { return rejected_; }  // draws discarded as held out

  // The generator's state with the counters, to resume a run exactly.
  std::string state() const;
  void set_state(const std::string& s);  // ValueError on a malformed state

 private:
  const Task* task_;
  std::shared_ptr<const InputSet> heldout_;
  Rng rng_;
  int64_t drawn_ = 0, rejected_ = 0;
};

}  // namespace attnlab
