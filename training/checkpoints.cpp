#include "training/checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "framework/error.h"
#include "framework/io/checkpoint.h"

namespace attnlab {

namespace fs = std::filesystem;

std::string CheckpointStore::stem(int64_t step) const {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return dir_ + "/" + name;
}

std::vector<int64_t> CheckpointStore::steps() const {
  std::vector<int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return steps;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename().string();
    long long step = 0;
    char tail[64] = {0};
    // step-00000200.safetensors (not the .optim file)
    if (std::sscanf(name.c_str(), "step-%lld.%63s", &step, tail) == 2 && std::string(tail) == "safetensors" &&
        fs::exists(optimizer_path(stem(step)), ec))
      steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void CheckpointStore::save(const TrainState& state, double elapsed_s, int64_t keep) const {
  const int64_t step = state.step;
  Metadata meta;
  meta["model_config"] = state.settings().model.to_json().dump();
  meta["step"] = std::to_string(step);
  meta["data_stream"] = state.stream().state();
  meta["dropout_rng"] = state.model().dropout_rng().state();
  meta["elapsed_s"] = std::to_string(elapsed_s);
  meta["solved_at"] = std::to_string(state.solved_at);
  std::error_code ec;
  try {
    save_checkpoint(stem(step), state.model(), &state.optimizer(), meta);
  } catch (const IoError& e) {
    if (!fs::exists(model_path(stem(step)), ec)) fs::remove(optimizer_path(stem(step)), ec);
    const std::vector<int64_t> intact = steps();
    throw CheckpointFailure(std::string(e.what()) + "; the checkpoint of step " + std::to_string(step) +
                                " was not written" +
                                (intact.empty() ? std::string()
                                                : "; the checkpoint of step " + std::to_string(intact.back()) +
                                                      " is intact"),
                            intact.empty() ? -1 : intact.back());
  }
  const std::vector<int64_t> present = steps();
  for (size_t i = 0; i + static_cast<size_t>(keep) < present.size(); ++i) {
    fs::remove(model_path(stem(present[i])), ec);
    fs::remove(optimizer_path(stem(present[i])), ec);
  }
}

double CheckpointStore::restore(TrainState& state, int64_t step) const {
  Metadata meta = load_checkpoint(stem(step), state.model(), &state.optimizer());
  try {
    state.stream().set_state(meta.at("data_stream"));
    state.model().dropout_rng().set_state(meta.at("dropout_rng"));
    const double elapsed_s = std::stod(meta.at("elapsed_s"));
    state.solved_at = std::stoll(meta.at("solved_at"));
    state.step = step;
    return elapsed_s;
  } catch (const std::exception& e) {  // a missing key, a malformed number or generator state
    throw IoError(model_path(stem(step)) + ": the training state in its metadata is missing or malformed (" +
                  e.what() + ")");
  }
}

}  // namespace attnlab
