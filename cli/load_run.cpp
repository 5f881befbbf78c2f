#include "cli/load_run.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/test_seams.h"

#include "datasets/vocab.h"
#include "framework/error.h"
#include "framework/io/checkpoint.h"
#include "models/batch.h"
#include "models/model_options.h"
#include "training/checkpoints.h"
#include "training/settings_options.h"

namespace attnlab::cli {

namespace fs = std::filesystem;

std::string run_vocab_path(const RunDir& run) { return run.path() + "/vocab.txt"; }

namespace {

// A model config field as config.ini names it (the long option), or what a
// derived field is (models/model_options.h).
std::string ini_name(const std::string& field) {
  const ModelOption* o = model_option(field);
  if (!o) return field;
  return o->flag[0] != '\0' ? o->flag : o->help;
}

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

void check_checkpoint_config(const TransformerConfig& config, const std::string& stem) {
  const Metadata meta = read_checkpoint_metadata(stem);
  auto it = meta.find("model_config");
  if (it == meta.end()) return;
  const std::string path = model_path(stem);
  // Through from_json, which gives a field the checkpoint was written without
  // (one added later) its meaning from before the field existed.
  nlohmann::json trained;
  try {
    trained = TransformerConfig::from_json(nlohmann::json::parse(it->second)).to_json();
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + ": its model_config metadata is not JSON (" + e.what() + ")");
  } catch (const ValueError& e) {
    throw IoError(path + ": its model_config metadata is not a valid model (" + e.what() + ")");
  }
  const std::string config_ini = fs::path(stem).parent_path().parent_path().string() + "/config.ini";
  const nlohmann::json described = config.to_json();
  for (const auto& [field, value] : described.items()) {
    if (trained.at(field) == value) continue;
    throw IoError(path + ": the checkpoint is of a different model than " + config_ini + " describes: config.ini gives " +
                  ini_name(field) + " = " + value_text(value) + ", the checkpoint was trained with " +
                  value_text(trained.at(field)) + " (was config.ini edited? restore it, or train a new run)");
  }
}

void check_checkpoint_vocabulary(const Task& task, const std::string& stem) {
  const Metadata meta = read_checkpoint_metadata(stem);
  auto it = meta.find("vocabulary");
  if (it == meta.end()) return;
  const std::string path = model_path(stem);
  std::vector<std::string> trained;
  try {
    trained = nlohmann::json::parse(it->second).at("tokens").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + ": its vocabulary metadata is malformed (" + e.what() + ")");
  }
  const std::string dir = fs::path(stem).parent_path().parent_path().string();
  const std::string source = task.saved_vocab().empty() ? dir + "/config.ini" : dir + "/vocab.txt";
  // Quoted as JSON strings, so that a newline or tab token keeps the message on one line.
  auto quoted = [](const std::string& token) { return nlohmann::json(shortened(token)).dump(); };
  for (int32_t id = 0; id < task.vocab_size(); ++id) {
    const size_t i = static_cast<size_t>(id);
    if (i < trained.size() && trained[i] == task.token_text(id)) continue;
    throw IoError(path + ": the checkpoint was trained with another vocabulary than " + source + " gives: token " +
                  std::to_string(id) + " is " + quoted(task.token_text(id)) + " there, " +
                  (i < trained.size() ? quoted(trained[i]) : "absent") +
                  " in the checkpoint (was it edited? restore it, or train a new run)");
  }
}

void check_checkpoint_options(const RunDir& run, const std::string& options, int64_t step) {
  const Metadata meta = read_checkpoint_metadata(run.checkpoint_stem(step));
  const auto recorded = meta.find(kCheckpointOptionsKey);
  if (recorded == meta.end()) return;  // written before checkpoints recorded their options
  const auto trained = ini_values(recorded->second), now = ini_values(options);
  // An option the record lacks was added after it was written (--train-size):
  // that run trained with its default, which is what runs did before it existed.
  TrainSettings default_values = default_settings();
  const auto defaults = ini_values(all_train_options(default_values).to_ini());
  auto value = [&defaults](const std::map<std::string, std::string>& settings, const std::string& name) {
    const auto it = settings.find(name);
    if (it != settings.end()) return name + " = " + it->second;
    const auto d = defaults.find(name);
    return d == defaults.end() ? std::string("nothing") : name + " = " + d->second;
  };
  std::set<std::string> names;
  for (const auto* settings : {&trained, &now})
    for (const auto& entry : *settings) names.insert(entry.first);
  for (const std::string& name : names) {
    if (resume_may_change(name) || value(trained, name) == value(now, name)) continue;
    throw IoError(run.config_path() + " gives " + value(now, name) + ", but the checkpoint of step " +
                  std::to_string(step) + " was trained with " + value(trained, name) +
                  " (was config.ini edited? restore it, or train a new run)");
  }
}

namespace {

// How often the latest checkpoint is chosen again when the one chosen was
// removed before it could be read: a run saving every step with --keep 1
// removes one per step, far slower than a choice and a read.
constexpr int kLoadAttempts = 5;

std::function<void(const std::string&)>& checkpoint_chosen_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

bool has_checkpoint(const RunDir& run, int64_t step) {
  const std::vector<int64_t> steps = run.checkpoint_steps();
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

// Checkpoint `step`'s weights into `out.model`, once its record agrees with
// the run's files (options, model, vocabulary, step).
void load_checked_checkpoint(const RunDir& run, LoadedRun& out, int64_t step) {
  const std::string stem = run.checkpoint_stem(step);
  check_checkpoint_config(out.settings.model, stem);  // first, as resume: a model edit is named as one
  TrainSettings settings = out.settings;                // (all_train_options binds to what it is given)
  check_checkpoint_options(run, all_train_options(settings).to_ini(), step);
  check_checkpoint_vocabulary(*out.task, stem);
  check_checkpoint_step(read_checkpoint_metadata(stem), step, model_path(stem));
  load_checkpoint(stem, *out.model, nullptr);
  out.step = step;
}

}  // namespace

void set_checkpoint_chosen_hook_for_tests(std::function<void(const std::string&)> hook) {
  checkpoint_chosen_hook() = std::move(hook);
}

LoadedRun load_run(const RunDir& run, int64_t step) {
  run.require_trained();
  LoadedRun out;
  out.settings = load_run_settings(run);
  out.task = make_task(out.settings.task);
  out.model = make_model(out.settings.model, 0);
  const bool latest = step <= 0;
  for (int attempt = 1;; ++attempt) {
    if (latest) step = run.latest_step();
    if (!has_checkpoint(run, step))
      throw IoError("run '" + run.path() + "' has no checkpoint of step " + std::to_string(step));
    if (checkpoint_chosen_hook()) checkpoint_chosen_hook()(run.checkpoint_stem(step));
    try {
      load_checked_checkpoint(run, out, step);
      return out;
    } catch (const IoError&) {
      if (has_checkpoint(run, step)) throw;  // it is there, and wrong
      if (!latest)
        throw IoError("run '" + run.path() + "' has no checkpoint of step " + std::to_string(step) +
                      " (it was removed while being read: the run is training and keeps only its newest --keep)");
      if (attempt == kLoadAttempts)
        throw IoError("the latest checkpoint of run '" + run.path() + "' was removed while being read, " +
                      std::to_string(kLoadAttempts) +
                      " times (the run is training and keeps only its newest --keep); try again");
    }
  }
}

namespace {

// Whether `text` is an add input as training draws them: `digits` digits, '+', `digits` digits.
bool trained_add_shape(const std::string& text, int64_t digits) {
  const auto d = static_cast<size_t>(digits);
  if (text.size() != 2 * d + 1 || text[d] != '+') return false;
  for (size_t i = 0; i < text.size(); ++i)
    if (i != d && (text[i] < '0' || text[i] > '9')) return false;
  return true;
}

}  // namespace

std::string input_shape_note(const LoadedRun& run, const std::vector<int32_t>& input) {
  const TaskConfig& t = run.settings.task;
  const int64_t size = static_cast<int64_t>(input.size());
  const bool has_length_range = t.name == "copy" || t.name == "reverse" || t.name == "sort" || t.name == "duplicate";
  if (has_length_range && (size < t.min_len || size > t.max_len))
    return "this model was trained on inputs of " +
           (t.min_len == t.max_len ? std::to_string(t.min_len)
                                   : std::to_string(t.min_len) + " to " + std::to_string(t.max_len)) +
           " symbols (--min-len " + std::to_string(t.min_len) + " --max-len " + std::to_string(t.max_len) +
           "); this one has " + std::to_string(size) + ", so expect mistakes";
  if (t.name == "add" && !trained_add_shape(run.task->to_text(input), t.digits)) {
    const std::string d = std::to_string(t.digits);
    return "this model was trained on inputs of two " + d + "-digit operands, " + d + " digits + " + d +
           " digits (--digits " + d + ", e.g. " + std::string(static_cast<size_t>(t.digits), '1') + "+" +
           std::string(static_cast<size_t>(t.digits), '2') + "); '" + run.task->to_text(input) +
           "' is not of that shape, so expect mistakes";
  }
  return "";
}

std::vector<int32_t> parse_input(const LoadedRun& run, const std::string& text) {
  std::vector<int32_t> input = run.task->from_text(text);
  if (input.empty()) throw ValueError("the input sequence is empty");
  for (int32_t id : input)
    if (Vocab::is_special(id))
      throw ValueError("the input holds the special token " + run.task->token_text(id) +
                       "; write only the task's symbols (attnlab tasks shows them)");
  const TransformerConfig& config = run.model->config();
  const int64_t size = static_cast<int64_t>(input.size());
  // The decoder reads [bos] input [sep] (--layout bare: the input alone); the others the input.
  const int64_t needed = config.arch == Arch::decoder ? prompt_length(batch_format(config, false), input.size()) : size;
  if (needed > config.max_len)
    throw ValueError("the input has " + std::to_string(input.size()) + " tokens; this model takes sequences of at most " +
                     std::to_string(config.max_len) + " positions" +
                     (needed > size ? " and reads it as [bos] input [sep], " + std::to_string(needed) + " positions" : ""));
  // Lengths the model never saw usually get a wrong answer; say why on stderr
  // (stdout keeps only the answer).
  if (const std::string note = input_shape_note(run, input); !note.empty()) std::cerr << "note: " << note << "\n";
  return input;
}

std::string answer_filled_table_note(const TransformerConfig& config) {
  // A bare answer has no <eos>: it ends at its expected length.
  const bool bare = batch_format(config, false) == BatchFormat::bare;
  return "the answer reached the end of the model's positional table (" + std::to_string(config.max_len) +
         " positions, --positions when it was trained) before " + (bare ? "its expected length" : "<eos>") +
         "; it may be cut short";
}

std::string answer_spent_budget_note(int64_t budget) {
  return "no <eos> after " + std::to_string(budget - 1) +
         " answer tokens (the expected answer's length, or the longest trained one); decoding stops one token past "
         "it, as eval's does";
}

void note_answer_filled_table(const TransformerConfig& config) {
  std::cerr << "note: " << answer_filled_table_note(config) << "\n";
}

void note_answer_spent_budget(int64_t budget) { std::cerr << "note: " << answer_spent_budget_note(budget) << "\n"; }

}  // namespace attnlab::cli
