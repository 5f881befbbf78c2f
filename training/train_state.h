#pragma once
// TrainState: what a training run holds between steps — the settings, the
// task with its held-out set and training stream, the model, the optimizer
// and the step count. A checkpoint saves it and a resumed run restores it
// (training/checkpoints.h); train_step (training/step.h) advances it.
#include <memory>
#include <vector>

#include "datasets/splits.h"
#include "datasets/train_set.h"
#include "framework/optim/optimizer.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "training/distributed/communicator.h"
#include "training/settings.h"
#include "training/thread_slices.h"

namespace attnlab {

// The seed stream of the initial weights, beside datasets/splits.h's
// kHeldoutStream (1) and kTrainStream (2): derive_seed(s.seed, kInitStream).
constexpr uint64_t kInitStream = 3;
// The seed of a --train-size set's epoch orders (datasets/train_set.h): derive_seed(s.seed, kTrainOrderStream).
constexpr uint64_t kTrainOrderStream = 4;
// The seed of the sharpness probe's first start vectors (training/sharpness_probe.h).
constexpr uint64_t kSharpnessStream = 5;
// The seed of the induction probe's repeated sequences (training/induction_probe.h).
constexpr uint64_t kInductionStream = 6;

class TrainState {
 public:
  // The task s.task names, or one of the caller's own; `s` finalized for it.
  // The held-out set comes from derive_seed(s.seed, kHeldoutStream) unless
  // the task brings its own, the training stream from kTrainStream, the
  // initial weights from kInitStream. With settings().train_size N > 0, the
  // training set is the stream's first N distinct inputs (check_train_size
  // refuses an N it cannot hold), shuffled per epoch from kTrainOrderStream
  // when --batch-size is smaller than N; a task with its own training set
  // (Task::own_train, modular) is walked the same way.
  explicit TrainState(const TrainSettings& s);
  TrainState(const TrainSettings& s, std::unique_ptr<Task> task);
  TrainState(const TrainState&) = delete;  // the stream refers to the task
  TrainState& operator=(const TrainState&) = delete;

  const TrainSettings& settings() const { return settings_; }
  Task& task() const { return *task_; }
  SequenceModel& model() const { return *model_; }
  Optimizer& optimizer() const { return *optimizer_; }
  TrainStream& stream() { return *stream_; }
  const TrainStream& stream() const { return *stream_; }
  const std::vector<Var>& parameters() const { return parameters_; }
  // The step's batch (settings().batch_size examples): from the fixed training set, or else the stream.
  std::vector<Example> next_batch();
  // The --train-size set; null without one.
  const TrainSet* train_set() const { return train_set_.get(); }
  // Where the data stands, for checkpoints: the set's state, or else the stream's.
  std::string data_state() const;
  void set_data_state(const std::string& s);  // ValueError on a malformed state
  // The examples evaluation scores: the task's own held-out set, or the one drawn.
  const std::vector<Example>& heldout() const;
  // The examples of step 1's batch, drawn again from a new stream like the
  // run's own, or with --train-size from the set in its first epoch's order
  // (the whole set under full batch): the sharpness probe's fixed batch; the
  // run's stream and set are not touched.
  std::vector<Example> first_batch() const;
  // How batches are laid out for the model: "lm" for a language model, else the architecture.
  BatchFormat batch_format() const { return batch_format_; }
  // The processes this run is spread over (default: this one alone). Must outlive the state.
  // Setting it splits the parameters among them (shard_bounds) and, with
  // settings().shard_optimizer, shards the optimizer: before any step or restore.
  const Communicator& communicator() const { return *communicator_; }
  void set_communicator(const Communicator& c);
  // The model's replicas for settings().threads workers, made on first use (training/thread_slices.h).
  ThreadSlices& thread_slices();
  // The N + 1 boundaries of the processes' slices of the flat parameters (training/distributed/shards.h).
  const std::vector<int64_t>& shard_bounds() const { return shard_bounds_; }

  int64_t step = 0;       // optimizer steps done (a skipped non-finite step counts)
  // The held-out target (settings().target, held for target_patience evaluations); -1: not (yet).
  int64_t solved_at = -1;                // the first evaluation of the streak that held it
  int64_t target_first_reached_at = -1;  // the first evaluation that reached it, held or not
  int64_t target_streak_start = -1;      // the first evaluation of the current streak reaching it
  int64_t target_streak = 0;             // evaluations in that streak
  // What this process's steps moved between the processes (their gradient
  // sums and statistics), over the steps this process ran: not checkpointed.
  Communicator::Traffic step_traffic;
  int64_t steps_run = 0;

  // Records an evaluation at `step`: whether it reached the target. Returns
  // true when this evaluation completes the patience (the run is solved now).
  bool record_target(int64_t step, bool reached);

 private:
  TrainSettings settings_;
  GemmPrecisionScope precision_{settings_.precision};  // the products' precision while the run lives
  std::unique_ptr<Task> task_;
  HeldOut drawn_heldout_;
  std::unique_ptr<TrainStream> stream_;
  std::unique_ptr<TrainSet> train_set_;
  std::unique_ptr<TrainStream> new_stream() const;  // the training stream as at step 0
  std::unique_ptr<SequenceModel> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<Var> parameters_;
  BatchFormat batch_format_ = BatchFormat::encoder;
  const Communicator* communicator_ = &single_process();
  std::vector<int64_t> shard_bounds_;
  std::unique_ptr<ThreadSlices> thread_slices_;
};

}  // namespace attnlab
