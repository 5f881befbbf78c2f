#pragma once
// Checkpoints of a training run and their retention:
//   DIR/step-NNNNNNNN.safetensors        the model's weights (dotted names; the model config in the metadata)
//   DIR/step-NNNNNNNN.optim.safetensors  the optimizer's state
// The metadata also holds what resuming needs to continue bitwise: the data
// stream's and the dropout generator's states, the step, the elapsed time and
// the step that reached the target.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "training/train_state.h"

namespace attnlab {

// A checkpoint that could not be written (a full disk, a file-size limit, the
// directory gone or read-only): what() names the reason and the step, and
// that step's partial files are gone. intact_step is the newest checkpoint
// still complete on disk, -1 if none.
struct CheckpointFailure : std::runtime_error {
  CheckpointFailure(const std::string& what, int64_t intact) : std::runtime_error(what), intact_step(intact) {}
  int64_t intact_step;
};

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string stem(int64_t step) const;  // DIR/step-NNNNNNNN, for framework/io/checkpoint.h
  // Steps of the complete checkpoints present (model and optimizer file), ascending.
  std::vector<int64_t> steps() const;

  // Writes the checkpoint of state.step, then removes all but the newest
  // `keep`. CheckpointFailure when it cannot be written.
  void save(const TrainState& state, double elapsed_s, int64_t keep) const;

  // Loads checkpoint `step` into `state`: weights, optimizer, data stream,
  // dropout generator, step and solved_at. Returns the elapsed seconds it
  // recorded. IoError for a missing, corrupt or foreign file.
  double restore(TrainState& state, int64_t step) const;

 private:
  std::string dir_;
};

}  // namespace attnlab
