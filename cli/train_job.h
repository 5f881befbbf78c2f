#pragma once
// `attnlab train` around the library's Trainer (training/trainer.h): the run
// directory's files, the progress display, the interrupt signals, and the
// report of how the run ended.
#include <string>

#include "cli/run_dir.h"
#include "training/communicator.h"
#include "training/settings.h"

namespace attnlab::cli {

struct TrainJob {
  TrainSettings settings;  // finalized
  RunDir run{""};
  bool resume = false;  // continue from the run's latest checkpoint
  bool quiet = false;
  std::string config_ini;  // the resolved options, written to config.ini
  const Communicator* processes = &single_process();  // the root process alone writes and prints
};

// Runs training and returns the exit code.
int train(const TrainJob& job);

}  // namespace attnlab::cli
