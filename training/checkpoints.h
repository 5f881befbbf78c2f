#pragma once
// Checkpoints of a training run and their retention:
//   DIR/step-NNNNNNNN.safetensors        the model's weights (dotted names; the model config in the metadata)
//   DIR/step-NNNNNNNN.optim.safetensors  the optimizer's state
// The metadata also holds what resuming needs to continue bitwise: the data
// stream's and the dropout generator's states, the step, the elapsed time and
// the step that reached the target; and, so that a model file can be used on
// its own (scripts/pytorch/attnlab_torch.py), what checkpoint_description() says.
// Files written before those keys existed (format 2 too) still load: nothing
// that loads a checkpoint requires them.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/io/checkpoint.h"
#include "training/train_state.h"

namespace attnlab {

// A file of a training run that could not be written (a full disk, a
// file-size limit, the directory gone or read-only): what() names the file,
// the reason and the newest checkpoint still complete on disk, intact_step
// (-1 if none). The run directory is kept: it holds the run's record.
struct RunWriteFailure : std::runtime_error {
  RunWriteFailure(const std::string& what, int64_t intact) : std::runtime_error(what), intact_step(intact) {}
  int64_t intact_step;
};
// A checkpoint that could not be written: what() also names its step, whose
// partial files are gone.
struct CheckpointFailure : RunWriteFailure {
  using RunWriteFailure::RunWriteFailure;
};

// The self-describing keys of a model file, each a string (JSON where noted):
//   task             JSON: the TaskConfig (name and every option)
//   vocabulary       JSON: {"tokens": [written form of id 0, 1, ...], "ids": {token: id},
//                    "written": "words" (separated by whitespace, joined by a space) |
//                    "chars" (every character a token, joined by nothing) |
//                    "chars_ignoring_whitespace" (add: "1 2+3" is "12+3")}
//   special_tokens   JSON: {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<sep>": 3}
//   sequence_layout  what the model reads and predicts, per model kind (sequence_layout())
//   attnlab_version  the version that wrote it (CMake's PROJECT_VERSION)
Metadata checkpoint_description(const TrainSettings& s, const Task& task);
// What a model of this batch layout reads and predicts, in words.
std::string sequence_layout(BatchFormat format);
// The version this library was built as.
const char* attnlab_version();

// IoError unless the checkpoint at `path` (metadata `meta`) is the one of
// `step`, the step its file name gives: a file renamed to another step would
// otherwise be resumed or evaluated as that step. Names both steps; a
// checkpoint without a "step" key is not checked.
void check_checkpoint_step(const Metadata& meta, int64_t step, const std::string& path);

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string stem(int64_t step) const;  // DIR/step-NNNNNNNN, for framework/io/checkpoint.h
  // Steps of the complete checkpoints present (model and optimizer file), ascending.
  std::vector<int64_t> steps() const;
  // Removes every checkpoint file of a step after `step` (on resume, the latest
  // complete one): the halves of one that a process ended at once left (a model
  // file without its optimizer file, or the reverse), which nothing would
  // otherwise replace.
  void remove_after(int64_t step) const;

  // Writes the checkpoint of state.step (with `extra` among its model file's
  // metadata), then removes all but the newest `keep`. CheckpointFailure when
  // it cannot be written. optimizer_state: a sharded optimizer's, gathered
  // (training/distributed/shards.h); null: state.optimizer().state().
  void save(const TrainState& state, double elapsed_s, int64_t keep, const Metadata& extra = {},
            const NamedTensors* optimizer_state = nullptr) const;

  // Loads checkpoint `step` into `state`: weights, optimizer, data stream,
  // dropout generator, step and solved_at. Returns the elapsed seconds it
  // recorded. IoError for a missing, corrupt or foreign file, or one that
  // holds another step (check_checkpoint_step).
  double restore(TrainState& state, int64_t step) const;

 private:
  std::string dir_;
};

}  // namespace attnlab
