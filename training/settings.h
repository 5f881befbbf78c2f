#pragma once
// Everything a training run is made of: the task, the model, the optimizer and
// its schedule, and how the loop runs. The attnlab CLI fills it from its flags
// (cli/train_options.h); a library user sets the fields and calls finalize().
#include <cstdint>
#include <string>

#include "datasets/task.h"
#include "framework/ops/gemm.h"
#include "framework/optim/optimizer.h"
#include "framework/optim/schedule.h"
#include "models/config.h"
#include "training/distributed/reduction.h"

namespace attnlab {

// What a non-finite loss or gradient does to a run (--on-nan; framework/choices.h).
enum class OnNan { stop, skip };
const ChoiceNames<OnNan>& choice_names(OnNan);

struct TrainSettings {
  TaskConfig task;
  TransformerConfig model;  // vocab_size and max_len are derived from the task
  OptimizerConfig optim;
  ScheduleConfig schedule;  // total_steps defaults to `steps`, d_model to the model's
  int64_t positions = 0;    // positional table size; 0 = automatic
  int64_t steps = 2000;
  int64_t batch_size = 64;
  int64_t train_size = 0;  // a fixed training set of this many examples (datasets/train_set.h); 0 = the endless stream
  int64_t grad_accum = 1;  // micro-batches per step and process, their gradients summed in a fixed order
  bool report = false;  // write RUN/report.html when the run ends (the CLI's; the loop ignores it)
  Reduction reduction = Reduction::automatic;  // how processes sum them (the same bits either way)
  bool shard_optimizer = false;  // under mpirun, each process keeps the optimizer state of its slice (ZeRO-1)
  double clip = 1.0;  // 0 = no clipping
  double label_smoothing = 0;
  int64_t eval_every = 100;
  int64_t heldout = 500;
  double target = 1.0;  // stop once held-out exact match reaches this; 0 = never
  int64_t target_patience = 1;  // ... at this many consecutive evaluations (the run is solved at the first)
  int64_t log_every = 50;
  int64_t keep = 3;  // checkpoints kept
  uint64_t seed = 0;
  int threads = 1;
  Precision precision = Precision::fp32;  // of the matrix products (framework/ops/gemm.h); the rest is fp32
  OnNan on_nan = OnNan::stop;
  int64_t probe_every = 0;  // gradient-flow and attention instruments every this many steps (and step 1); 0 = off
  bool noise_scale = false;  // record B_simple from the micro-batches' squared gradient norms (training/noise_scale.h)
  // λ_max of the training loss's Hessian every this many steps (and step 1); 0 = off
  // (training/sharpness_probe.h): Lanczos to this relative tolerance, at most this many products
  int64_t probe_sharpness = 0;
  double sharpness_tol = 1e-3;
  int64_t sharpness_iters = 20;
  // per-head induction scores on a fixed repeated sequence every this many steps (and step 1);
  // 0 = off; decoder-only models (training/induction_probe.h)
  int64_t probe_induction = 0;
  bool tensorboard = false;  // also TensorBoard event files (events.out.tfevents.*) in the run directory
};

// Defaults of the experiment: the settings of `attnlab train` with no flags.
TrainSettings default_settings();

// Validates and completes the settings: derives the vocabulary size,
// positions and schedule fields, checks ranges and combinations. Throws
// ValueError naming the option (as its CLI flag) and the value. The first
// form builds the task s.task names; the second takes a task of the
// caller's own (a Task subclass), whose vocabulary and lengths it uses.
void finalize(TrainSettings& s);
void finalize(TrainSettings& s, const Task& task);

// The held-out set a training run draws: ValueError when --heldout takes more
// than half of a generated task's distinct inputs, or --heldout-fraction of a
// pairs file is 0 or more than half of its inputs, saying how many inputs
// there are and how many would be left to train on.
// modular: ValueError for --heldout away from its default (the held-out set
// is every pair not trained on). With --train-size, also check_train_size.
void check_heldout(const TrainSettings& s);
void check_heldout(const TrainSettings& s, const Task& task);
// --train-size N (N > 0): ValueError for a task read from a file or for
// modular (each has its fixed set), or N above the distinct inputs the
// held-out set leaves.
void check_train_size(const TrainSettings& s, const Task& task);

// The longest sequence the model sees for this task and architecture.
int64_t needed_positions(const Task& task, const TransformerConfig& model);

}  // namespace attnlab
