#pragma once
// A run directory:
//   config.ini             every resolved option: `attnlab train --config DIR/config.ini` repeats the run
//   metrics.csv            one row every --log-every steps (held-out columns filled at evaluations)
//   summary.json           written at the end: final metrics, steps, seconds, whether the target was reached
//   checkpoints/step-NNNNNNNN.safetensors        the model's weights (dotted names; config in the metadata)
//   checkpoints/step-NNNNNNNN.optim.safetensors  the optimizer's state
#include <cstdint>
#include <string>
#include <vector>

#include "cli/train_settings.h"

namespace attnlab::cli {

class RunDir {
 public:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  std::string config_path() const { return path_ + "/config.ini"; }
  std::string metrics_path() const { return path_ + "/metrics.csv"; }
  std::string summary_path() const { return path_ + "/summary.json"; }
  std::string checkpoint_dir() const { return path_ + "/checkpoints"; }
  std::string checkpoint_stem(int64_t step) const;
  // Steps of the complete checkpoints present (model and optimizer file), ascending.
  std::vector<int64_t> checkpoint_steps() const;
  // IoError unless this is a run directory (it has config.ini) with at least one checkpoint.
  void require_trained() const;
  int64_t latest_step() const;  // require_trained() first

 private:
  std::string path_;
};

// Reads a run's config.ini into settings (then `extra` command-line args may
// override some of them); IoError for a missing or foreign directory.
TrainSettings load_run_settings(const RunDir& run);

}  // namespace attnlab::cli
