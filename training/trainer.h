#pragma once
// The training loop as a library: Trainer runs a TrainState's steps and
// composes the pieces of a run — evaluation (training/evaluate.h),
// checkpoints and their retention (training/checkpoints.h), the NaN/Inf
// policy, interrupts, metrics (training/metrics_log.h) and the instruments
// (framework/probe/training_probe.h, training/sharpness_probe.h,
// training/induction_probe.h, training/fourier_probe.h). It prints nothing: the caller shows
// progress and reports the outcome (cli/train.cpp does both for `attnlab train`).
//
//   attnlab::TrainSettings s = attnlab::default_settings();
//   s.task.name = "reverse";
//   attnlab::finalize(s);
//   attnlab::TrainState state(s);
//   attnlab::TrainOutcome out = attnlab::Trainer(state, {}).run();
//   // out.heldout.accuracy.exact: held-out exact match after the last step
//
// Per step: train_step; every --log-every steps a metrics row (and a check
// that no weight became NaN or Inf); every --eval-every steps and at the last
// step a held-out evaluation and a checkpoint; the run ends early once the
// evaluation reaches --target. A NaN or Inf loss or gradient stops the run
// (on_nan "stop") or skips the step ("skip"); a non-finite weight always stops
// it, before any checkpoint holds it.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "training/checkpoints.h"
#include "training/fourier_probe.h"
#include "training/induction_probe.h"
#include "training/metrics_log.h"
#include "training/sharpness_probe.h"
#include "training/step.h"

namespace attnlab {

struct TrainOutcome;

struct TrainerOptions {
  // metrics.csv, checkpoints/ and probe_*.csv are written here (by the root
  // process of a data-parallel run; every process reads a resumed run's
  // checkpoint); empty: no files (then probes cannot be on).
  std::string run_dir;
  bool resume = false;  // continue from run_dir's latest checkpoint
  // Polled after every step and between the batches of an evaluation: true
  // stops the run after that step, which is checkpointed first (interrupts).
  std::function<bool()> stop_requested;
  std::function<void(const ProgressStats&)> on_step;     // after every step that made an update
  std::function<void(const std::string&)> on_warning;    // a step skipped (on_nan "skip")
  std::function<void()> on_checkpoint;                   // after every checkpoint written
  // Once the run has finished (every step done, or the target reached), with
  // run()'s outcome, before its last checkpoint is written: what the caller
  // writes here (the CLI: summary.json) then exists whenever that checkpoint does.
  std::function<void(const TrainOutcome&)> on_finish;
  StepHooks hooks;  // gradient reduction; fault injection in tests
  Metadata checkpoint_metadata;  // added to every checkpoint's model file (the CLI: the run's config.ini)
};

enum class TrainEnd {
  finished,     // every step done, or the target reached; heldout holds the last evaluation
  // stop_requested after step last_step; that state is checkpointed. A held-out
  // evaluation it abandoned is owed by the checkpoint: resuming does it first.
  interrupted,
  nonfinite,    // a NaN or Inf stopped the run; nothing was written after the last checkpoint
};

struct TrainOutcome {
  TrainEnd end = TrainEnd::finished;
  int64_t last_step = 0;
  HeldoutScore heldout;   // finished: the figures of the last held-out evaluation
  double seconds = 0;     // training time, earlier runs of a resumed one included
  std::string problem;    // nonfinite: what was found, e.g. "non-finite loss at step 3 (...)"
  std::string policy;     // nonfinite: why that stopped the run, e.g. "--on-nan stop"
};

// Whether the checkpoint at `stem` owes its step's held-out evaluation (a
// signal abandoned it): resuming it does that evaluation before any step,
// with the metrics row, the target check and the checkpoint the run without
// the signal wrote, even when it is the last step. IoError for an unreadable file.
bool owes_evaluation(const std::string& stem);

class Trainer {
 public:
  // Creates the run's files (or, resuming, restores `state` from the latest
  // checkpoint and cuts metrics.csv back to it). ValueError for probes
  // without a run directory; IoError for files it cannot write or read.
  Trainer(TrainState& state, TrainerOptions options);
  ~Trainer();

  // Steps state.step + 1 .. settings().steps, then evaluates if the last step did not.
  // RunWriteFailure when a checkpoint, metrics.csv, the event file or a probe
  // file cannot be written (a checkpoint's: CheckpointFailure); under several
  // processes every process throws it after the same step.
  TrainOutcome run();

 private:
  void probe_sharpness(const StepResult& r);
  void probe_induction(int64_t step);
  void record_fourier(int64_t step);
  std::optional<TrainOutcome> after_update(const StepResult& r);
  std::optional<TrainOutcome> after_nonfinite(const StepResult& r);
  std::optional<TrainOutcome> check_weights(int64_t step) const;
  std::optional<TrainOutcome> interrupted(int64_t step, bool checkpointed);
  TrainOutcome owe_evaluation(int64_t step);
  TrainOutcome finished() const;
  void save_evaluated();
  std::optional<TrainOutcome> settle_owed_evaluation();
  void restore(int64_t step);
  void report(const StepResult& r, bool log_now, bool evaluated);
  bool evaluate();  // false: abandoned by stop_requested
  void save();
  RunWriteFailure write_failure(const std::string& what) const;  // names the newest intact checkpoint
  void excluded(const std::function<void()>& work);  // work's time is left out of tokens_per_s
  double elapsed() const;
  bool stop_requested() const;

  TrainState& state_;
  const TrainSettings& s_;
  TrainerOptions options_;
  std::optional<CheckpointStore> checkpoints_;
  std::optional<MetricsLog> metrics_;
  std::unique_ptr<TfEventsWriter> events_;  // --tensorboard; metrics_ and probe_ write to it
  std::unique_ptr<TrainingProbe> probe_;
  std::optional<NoiseScaleEma> noise_;  // --noise-scale
  std::unique_ptr<TrainingSharpness> sharpness_;  // --probe-sharpness
  std::unique_ptr<TrainingInduction> induction_;  // --probe-induction
  bool fourier_ = false;                          // a modular run: the embedding's spectrum at each evaluation
  std::unique_ptr<TrainingFourier> fourier_csv_;  // ... written by the root process
  double elapsed_before_ = 0;
  std::chrono::steady_clock::time_point clock_start_;
  HeldoutScore held_;
  bool held_valid_ = false;
  std::string owed_;  // the evaluation the checkpoints of this step owe: "", kOwedWithRow or kOwedFinal
  bool solved_ = false;
  ProgressStats stats_;
};

}  // namespace attnlab
