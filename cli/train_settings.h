#pragma once
// Everything a training run is made of, and the options that set it.
#include <cstdint>
#include <set>
#include <string>

#include "cli/option_set.h"
#include "datasets/task.h"
#include "framework/optim/optimizer.h"
#include "framework/optim/schedule.h"
#include "models/config.h"

namespace attnlab::cli {

struct TrainSettings {
  TaskConfig task;
  TransformerConfig model;  // vocab_size and max_len are derived from the task
  OptimizerConfig optim;
  ScheduleConfig schedule;  // total_steps defaults to `steps`, d_model to the model's
  int64_t positions = 0;    // positional table size; 0 = automatic
  int64_t steps = 2000;
  int64_t batch_size = 64;
  double clip = 1.0;  // 0 = no clipping
  double label_smoothing = 0;
  int64_t eval_every = 100;
  int64_t heldout = 500;
  double target = 1.0;  // stop once held-out exact match reaches this; 0 = never
  int64_t log_every = 50;
  int64_t keep = 3;  // checkpoints kept
  uint64_t seed = 0;
  int threads = 1;
  std::string on_nan = "stop";  // stop | skip
  int64_t probe_every = 0;  // gradient-flow and attention instruments every this many steps (and step 1); 0 = off
  // The options the user wrote on the command line (given_options right after
  // parsing), not an option itself: finalize refuses those among them that
  // would be ignored (--digits with copy). A config file is not checked this
  // way, since a run's config.ini holds every option, applicable or not.
  std::set<std::string> command_line;
};

// Defaults of the experiment: the settings of `attnlab train` with no flags.
TrainSettings default_settings();

// The option groups of `train` (and the model/task flags other commands share).
OptionSet task_options(TaskConfig& task);
OptionSet model_options(TrainSettings& s);
OptionSet optimization_options(TrainSettings& s);
OptionSet training_options(TrainSettings& s);
OptionSet all_train_options(TrainSettings& s);

// Validates and completes the settings after parsing: derives vocab size,
// positions and schedule fields, checks ranges and combinations, and refuses
// options of `command_line` that do not apply to the task or model. Throws
// ValueError naming the option and value.
void finalize(TrainSettings& s);

// The held-out set a training run draws (train only: gradcheck holds nothing
// out, and a trained run's set is already drawn): ValueError when --heldout
// takes more than half of a generated task's distinct inputs, or
// --heldout-fraction of a pairs file is 0 or more than half of its inputs,
// saying how many inputs there are and how many would be left to train on.
void check_heldout(const TrainSettings& s);

// The longest sequence the model sees for this task and architecture.
int64_t needed_positions(const Task& task, const std::string& arch);

}  // namespace attnlab::cli
