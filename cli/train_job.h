#pragma once
// `attnlab train` around the library's Trainer (training/trainer.h): the run
// directory's files, the progress display, and the report of how the run
// ended. run_train holds the InterruptGuard (cli/signals.h) from its start.
#include <memory>
#include <set>
#include <string>

#include "cli/progress.h"
#include "cli/run_settings.h"
#include "cli/signals.h"
#include "training/distributed/communicator.h"
#include "training/settings.h"
#include "training/settings_options.h"
#include "training/trainer.h"

namespace attnlab::cli {

// One `train`: its command line beside the experiment's options, then what
// cli/train.cpp resolves from it.
struct TrainJob {
  std::string run_path, config_file, resume_path;  // --run, --config, --resume as given
  bool quiet = false, overwrite = false, check_only = false;
  std::set<std::string> given;  // the options written on the command line (not from --config)

  TrainSettings settings;  // finalized
  RunDir run{""};          // --run, or runs/<task>-<model>
  std::string config_ini;  // the resolved options, written to config.ini
  std::string given_ini;   // those the user gave (command line or --config), written to given_options.ini
  const Communicator* communicator = &single_process();  // the root process alone writes and prints

  bool resume() const { return !resume_path.empty(); }  // continue from the run's latest checkpoint
};

// "mpirun -np N " when this process is one of N > 1, else "": the start of a
// command that repeats or resumes the run as it was launched.
std::string launch_prefix();

// One `train` in two halves, so that under mpirun every refusal is met
// before the first step and decided by all processes together
// (cli/decide_together.h): the constructor does everything before the first
// step, run() trains and reports.
class TrainSession {
 public:
  // The model and data (a resumed run's checkpoint restored), the run's files
  // written (a resumed run's checked against its checkpoint), the trainer set
  // up. Throws on bad input; writes config.ini, the vocabulary and metrics.csv.
  explicit TrainSession(const TrainJob& job);
  ~TrainSession();
  // Trains and returns the exit code. RunFailure, on every process at once,
  // when a file of the run cannot be written (the run is kept).
  int run();

 private:
  const TrainJob& job_;
  std::unique_ptr<TrainState> state_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace attnlab::cli
