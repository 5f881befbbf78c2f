#pragma once
// A run directory:
//   .attnlab-run           marker written when `attnlab train` creates the run: --overwrite replaces only marked runs
//   .lock                  held (flock) by the process training in it; holds that process's pid (lock.h)
//   config.ini             every resolved option: `attnlab train --config DIR/config.ini` repeats the run
//   given_options.ini      the options of config.ini the user gave (command line or --config); the rest are resolved
//   metrics.csv            one row every --log-every steps (held-out columns filled at evaluations)
//   summary.json           written at the end: final metrics, steps, seconds, whether the target was reached
//   checkpoints/step-NNNNNNNN.safetensors        the model's weights (dotted names; config in the metadata)
//   checkpoints/step-NNNNNNNN.optim.safetensors  the optimizer's state
//   attention/             `attnlab attention`'s default output (marked .attnlab-attention)
#include <cstdint>
#include <string>
#include <vector>

namespace attnlab {

class RunDir {
 public:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  std::string config_path() const { return path_ + "/config.ini"; }
  std::string given_options_path() const { return path_ + "/given_options.ini"; }
  std::string metrics_path() const { return path_ + "/metrics.csv"; }
  std::string summary_path() const { return path_ + "/summary.json"; }
  std::string checkpoint_dir() const { return path_ + "/checkpoints"; }
  std::string marker_path() const { return path_ + "/.attnlab-run"; }
  // Whether the directory carries the marker `attnlab train` writes when it creates a run.
  bool has_marker() const;
  void write_marker() const;  // IoError naming the path and the reason
  std::string checkpoint_stem(int64_t step) const;
  // Steps of the complete checkpoints present (model and optimizer file), ascending.
  std::vector<int64_t> checkpoint_steps() const;
  // IoError unless the path is a directory: one line saying what it is
  // instead (missing, a file, a symlink loop or unreadable).
  void require_directory() const;
  // IoError unless this is a run directory (it has config.ini) with at least one checkpoint.
  void require_trained() const;
  int64_t latest_step() const;  // require_trained() first

 private:
  std::string path_;
};

// Removes what attnlab writes into a run (config, metrics, summary, vocabulary,
// probe logs, checkpoints, the default attention maps, their temporaries) and
// nothing else: a user's own files stay, and so do the marker and the lock
// file. IoError naming the first file it could not remove.
void remove_run_files(const RunDir& run);

// Whether every entry of the directory is one that attnlab writes.
bool holds_only_own_files(const RunDir& run);

// The marker `attnlab attention` writes into an output directory it creates
// (or takes empty): only a directory with it has its files replaced by a later
// `attention --out`. A marker that is a symlink or not a regular file is none.
inline constexpr const char* kAttentionMarker = ".attnlab-attention";
bool has_attention_marker(const std::string& dir);
void write_attention_marker(const std::string& dir);  // IoError naming the path and the reason

}  // namespace attnlab
