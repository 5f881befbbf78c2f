#include "training/checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "framework/error.h"
#include "framework/io/checkpoint.h"

// CMakeLists.txt defines it for this file only (so only it rebuilds when the version changes).
#ifndef ATTNLAB_VERSION
#define ATTNLAB_VERSION "unknown"
#endif

namespace attnlab {

namespace fs = std::filesystem;

namespace {

nlohmann::json task_json(const TaskConfig& t) {
  return {{"name", t.name},         {"vocab", t.vocab},
          {"min_len", t.min_len},   {"max_len", t.max_len},
          {"digits", t.digits},     {"seed", t.seed},
          {"span", t.span},         {"file", t.file},
          {"heldout_file", t.heldout_file}, {"heldout_fraction", t.heldout_fraction},
          {"tokenize", name_of(t.tokenize)}, {"seq_len", t.seq_len},
          {"operation", name_of(t.operation)}, {"modulus", t.modulus},
          {"train_fraction", t.train_fraction}};
}

// How text is cut into tokens: file tasks by their table's mode, add by characters (whitespace ignored).
std::string written_form(const Task& task) {
  const std::string& name = task.config().name;
  if (name == "pairs") return name_of(task.config().tokenize);
  if (name == "text") return name_of(Tokenize::chars);
  return task.vocab().char_level() ? "chars_ignoring_whitespace" : "words";
}

nlohmann::json vocabulary_json(const Task& task) {
  nlohmann::json tokens = nlohmann::json::array(), ids = nlohmann::json::object();
  for (int32_t id = 0; id < task.vocab_size(); ++id) {
    const std::string token = task.token_text(id);
    tokens.push_back(token);
    ids[token] = id;
  }
  return {{"tokens", tokens}, {"ids", ids}, {"written", written_form(task)}};
}

// The step of a checkpoint's model file (step-00000200.safetensors) or, with
// `optimizer`, of its optimizer file (step-00000200.optim.safetensors); -1 for
// any other name.
int64_t checkpoint_file_step(const std::string& name, bool optimizer) {
  long long step = 0;
  char tail[64] = {0};
  if (std::sscanf(name.c_str(), "step-%lld.%63s", &step, tail) != 2) return -1;
  return std::string(tail) == (optimizer ? "optim.safetensors" : "safetensors") ? step : -1;
}
}  // namespace

const char* attnlab_version() { return ATTNLAB_VERSION; }

std::string sequence_layout(BatchFormat format) {
  switch (format) {
    case BatchFormat::encoder: return "input -> answer: one prediction per input position, [pad] past the answer's end";
    case BatchFormat::decoder: return "[bos] input [sep] answer [eos]: the answer decoded greedily after [sep]";
    case BatchFormat::seq2seq: return "encoder: input; decoder: [bos] answer [eos], decoded greedily after [bos]";
    case BatchFormat::bare: return "input answer, no special tokens: the answer (of the length the task gives) decoded greedily after the input";
    case BatchFormat::lm: return "text: each position predicts the next token (no special tokens)";
  }
  return "";
}

Metadata checkpoint_description(const TrainSettings& s, const Task& task) {
  Metadata meta;
  meta["task"] = task_json(s.task).dump();
  meta["vocabulary"] = vocabulary_json(task).dump();
  meta["special_tokens"] = nlohmann::json{{"<pad>", kPad}, {"<bos>", kBos}, {"<eos>", kEos}, {"<sep>", kSep}}.dump();
  meta["sequence_layout"] = sequence_layout(batch_format(s.model, task.language_model()));
  meta["attnlab_version"] = attnlab_version();
  return meta;
}

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
    const int64_t step = checkpoint_file_step(entry.path().filename().string(), false);
    if (step >= 0 && fs::exists(optimizer_path(stem(step)), ec)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void CheckpointStore::remove_after(int64_t step) const {
  std::error_code ec;
  std::vector<fs::path> later;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (checkpoint_file_step(name, false) > step || checkpoint_file_step(name, true) > step)
      later.push_back(entry.path());
  }
  for (const auto& path : later) fs::remove(path, ec);
}

void CheckpointStore::save(const TrainState& state, double elapsed_s, int64_t keep, const Metadata& extra,
                           const NamedTensors* optimizer_state) const {
  const int64_t step = state.step;
  Metadata meta = checkpoint_description(state.settings(), state.task());
  meta.insert(extra.begin(), extra.end());
  meta["model_config"] = state.settings().model.to_json().dump();
  meta["step"] = std::to_string(step);
  meta["data_stream"] = state.data_state();  // the stream's, or the --train-size set's
  meta["dropout_rng"] = state.model().dropout_rng().state();
  meta["elapsed_s"] = std::to_string(elapsed_s);
  meta["solved_at"] = std::to_string(state.solved_at);
  meta["target_first_reached_at"] = std::to_string(state.target_first_reached_at);
  meta["target_streak_start"] = std::to_string(state.target_streak_start);
  meta["target_streak"] = std::to_string(state.target_streak);
  std::error_code ec;
  try {
    if (optimizer_state) save_checkpoint(stem(step), state.model(), *optimizer_state, meta);
    else save_checkpoint(stem(step), state.model(), &state.optimizer(), meta);
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

void check_checkpoint_step(const Metadata& meta, int64_t step, const std::string& path) {
  const auto it = meta.find("step");
  if (it == meta.end() || it->second == std::to_string(step)) return;
  throw IoError(path + ": its file name gives step " + std::to_string(step) +
                ", but its metadata says it is the checkpoint of step " + shortened(it->second) +
                " (was it renamed? give it back its name, or remove it)");
}

double CheckpointStore::restore(TrainState& state, int64_t step) const {
  // Checked before anything is loaded, so a refused file changes nothing.
  check_checkpoint_step(read_checkpoint_metadata(stem(step)), step, model_path(stem(step)));
  Metadata meta = load_checkpoint(stem(step), state.model(), &state.optimizer());
  try {
    state.set_data_state(meta.at("data_stream"));
    state.model().dropout_rng().set_state(meta.at("dropout_rng"));
    const double elapsed_s = std::stod(meta.at("elapsed_s"));
    state.solved_at = std::stoll(meta.at("solved_at"));
    // Checkpoints written before --target-patience lack the streak: none is running.
    const auto count = [&](const char* key, int64_t absent) {
      const auto it = meta.find(key);
      return it == meta.end() ? absent : std::stoll(it->second);
    };
    state.target_first_reached_at = count("target_first_reached_at", state.solved_at);
    state.target_streak_start = count("target_streak_start", -1);
    state.target_streak = count("target_streak", 0);
    state.step = step;
    return elapsed_s;
  } catch (const std::exception& e) {  // a missing key, a malformed number or generator state
    throw IoError(model_path(stem(step)) + ": the training state in its metadata is missing or malformed (" +
                  e.what() + ")");
  }
}

}  // namespace attnlab
