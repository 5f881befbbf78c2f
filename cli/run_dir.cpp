#include "cli/run_dir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "framework/io/checkpoint.h"

namespace attnlab::cli {

namespace fs = std::filesystem;

std::string RunDir::checkpoint_stem(int64_t step) const {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return checkpoint_dir() + "/" + name;
}

std::vector<int64_t> RunDir::checkpoint_steps() const {
  std::vector<int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(checkpoint_dir(), ec)) return steps;
  for (const auto& entry : fs::directory_iterator(checkpoint_dir(), ec)) {
    std::string name = entry.path().filename().string();
    long long step = 0;
    char tail[64] = {0};
    // step-00000200.safetensors (not the .optim file)
    if (std::sscanf(name.c_str(), "step-%lld.%63s", &step, tail) == 2 && std::string(tail) == "safetensors" &&
        fs::exists(optimizer_path(checkpoint_stem(step)), ec))
      steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void RunDir::require_trained() const {
  std::error_code ec;
  if (!fs::is_directory(path_, ec)) throw IoError("run directory '" + path_ + "' does not exist");
  if (!fs::exists(config_path(), ec))
    throw IoError("'" + path_ + "' is not an attnlab run directory (no config.ini)");
  if (checkpoint_steps().empty()) throw IoError("run directory '" + path_ + "' has no checkpoint yet");
}

int64_t RunDir::latest_step() const {
  auto steps = checkpoint_steps();
  if (steps.empty()) throw IoError("run directory '" + path_ + "' has no checkpoint yet");
  return steps.back();
}

TrainSettings load_run_settings(const RunDir& run) {
  std::error_code ec;
  if (!fs::is_directory(run.path(), ec)) throw IoError("run directory '" + run.path() + "' does not exist");
  std::ifstream in(run.config_path());
  if (!in) throw IoError("'" + run.path() + "' is not an attnlab run directory (no readable config.ini)");
  TrainSettings s = default_settings();
  OptionSet options = all_train_options(s);
  po::variables_map vm;
  try {
    po::store(po::parse_config_file(in, options.description(), false), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw IoError(run.config_path() + ": " + e.what());
  }
  // A run with a saved vocabulary (file tasks) builds its task from it, not
  // from its data file, which may have changed or gone since.
  const std::string vocab = run.path() + "/vocab.txt";
  if (fs::exists(vocab, ec)) s.task.vocab_path = vocab;
  finalize(s);
  return s;
}

}  // namespace attnlab::cli
