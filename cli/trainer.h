#pragma once
// The training loop of `attnlab train`: data, model, optimizer, evaluation,
// metrics, checkpoints, progress.
#include <string>

#include "cli/run_dir.h"
#include "cli/train_settings.h"

namespace attnlab::cli {

struct TrainInvocation {
  TrainSettings settings;  // finalized
  RunDir run{""};
  bool resume = false;  // continue from the run's latest checkpoint
  bool quiet = false;
  std::string config_ini;  // the resolved options, written to config.ini
};

// Runs training and returns the exit code.
int train(const TrainInvocation& job);

}  // namespace attnlab::cli
