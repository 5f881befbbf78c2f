#include "cli/report_data.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "cli/load_run.h"
#include "cli/run_settings.h"
#include "datasets/text_baselines.h"
#include "cli/train_options.h"
#include "framework/error.h"
#include "framework/io/atomic_file.h"
#include "framework/io/checkpoint.h"
#include "framework/io/csv.h"
#include "training/run_dir/lock.h"

namespace attnlab::cli {

namespace fs = std::filesystem;

namespace {

// Run files the report reads whole; far beyond what a long run writes.
constexpr uint64_t kMaxCsvBytes = uint64_t(1) << 30;

// The options the user gave (given_options.ini), or null for a run trained
// before attnlab recorded them.
nlohmann::json given_data(const RunDir& run) {
  std::error_code ec;
  if (!fs::exists(run.given_options_path(), ec)) return nullptr;
  nlohmann::json given = nlohmann::json::object();
  for (const auto& [name, value] : ini_values(read_file(run.given_options_path(), 1 << 20, "given options")))
    given[name] = value;
  return given;
}

// Every setting of config.ini; those whose value is not train's default;
// those the user gave (null when not recorded) and those attnlab resolved:
// differing from the default, not given.
nlohmann::json settings_data(const RunDir& run) {
  const auto values = ini_values(read_file(run.config_path(), 1 << 20, "config file"));
  TrainSettings defaults = default_settings();
  const auto default_values = ini_values(all_train_options(defaults).to_ini());
  const nlohmann::json given = given_data(run);
  nlohmann::json all = nlohmann::json::object(), differing = nlohmann::json::object();
  nlohmann::json resolved = nlohmann::json::object();
  for (const auto& [name, value] : values) {
    all[name] = value;
    auto it = default_values.find(name);
    if (it != default_values.end() && it->second == value) continue;
    differing[name] = value;
    if (!given.is_null() && !given.contains(name)) resolved[name] = value;
  }
  return {{"all", all}, {"differing", differing}, {"given", given},
          {"resolved", given.is_null() ? nlohmann::json(nullptr) : resolved}};
}

// "running" while a process holds the run's lock (training or resuming it),
// else "finished" with a summary.json, else "interrupted".
std::string run_state(const RunDir& run) {
  try {
    RunLock::refuse_if_held(run.path());
  } catch (const IoError&) {
    return "running";
  }
  std::error_code ec;
  return fs::exists(run.summary_path(), ec) ? "finished" : "interrupted";
}

// A language model's unigram and bigram baselines (datasets/text_baselines.h) on
// the run's own split of its text; null for other tasks or a text file gone.
nlohmann::json baselines_data(const LoadedRun& loaded) {
  auto [train, heldout] = loaded.task->text_split();
  if (!loaded.task->language_model() || train.empty() || heldout.empty()) return nullptr;
  for (auto* part : {&train, &heldout})
    for (int32_t& id : *part) id -= kNumSpecial;  // characters only: the special tokens never occur
  const TextBaselines b = text_baselines(train, heldout, loaded.task->vocab_size() - kNumSpecial);
  return {{"unigram_bits_per_char", b.unigram_bits_per_char},
          {"bigram_bits_per_char", b.bigram_bits_per_char},
          {"heldout_chars", b.heldout_chars}};
}

nlohmann::json summary_data(const RunDir& run) {
  std::error_code ec;
  if (!fs::exists(run.summary_path(), ec)) return nullptr;  // interrupted before the end: the report says so
  try {
    return nlohmann::json::parse(read_file(run.summary_path(), 16 << 20, "summary"));
  } catch (const nlohmann::json::exception& e) {
    throw IoError(run.summary_path() + " is not JSON (" + e.what() + ")");
  }
}

// A table with only `keep` of its columns, in that order (each must be there).
nlohmann::json select_columns(const nlohmann::json& table, const std::vector<std::string>& keep) {
  std::vector<size_t> at;
  for (const std::string& name : keep) {
    const auto& columns = table["columns"];
    at.push_back(static_cast<size_t>(std::find(columns.begin(), columns.end(), name) - columns.begin()));
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : table["rows"]) {
    nlohmann::json kept = nlohmann::json::array();
    for (size_t i : at) kept.push_back(row[i]);
    rows.push_back(std::move(kept));
  }
  return {{"columns", keep}, {"rows", std::move(rows)}};
}

// The probe CSVs, when the run recorded them (train --probe-every N, --probe-sharpness N,
// --probe-induction N; a modular run's embedding_fourier.csv): the columns the page draws,
// which keeps a long probed run's page small.
nlohmann::json probes_data(const RunDir& run) {
  const std::map<std::string, std::pair<std::string, std::vector<std::string>>> files = {
      {"params", {"probe_params.csv", {"step", "param", "grad_norm", "update_ratio"}}},
      {"stream", {"probe_stream.csv", {"step", "index", "point", "act_rms", "grad_rms"}}},
      {"heads", {"probe_heads.csv", {"step", "layer", "head", "entropy"}}},
      {"sharpness", {"probe_sharpness.csv", {"step", "operator", "lambda_max", "iterations", "converged", "threshold"}}},
      {"induction", {"probe_induction.csv", {"step", "layer", "head", "prefix_matching", "previous_token"}}},
      {"fourier", {"embedding_fourier.csv", {"step", "frequency", "norm"}}}};
  nlohmann::json out = nlohmann::json::object();
  std::error_code ec;
  for (const auto& [name, file] : files) {
    const auto& [file_name, columns] = file;
    const std::string path = run.path() + "/" + file_name;
    if (fs::exists(path, ec)) out[name] = select_columns(read_csv_table(path, columns), columns);
  }
  return out;
}

nlohmann::json model_data(const RunDir& run, const LoadedRun& loaded) {
  const Metadata meta = read_checkpoint_metadata(run.checkpoint_stem(loaded.step));
  auto version = meta.find("attnlab_version");
  return {{"config", loaded.model->config().to_json()},
          {"parameters", loaded.model->parameter_count()},
          {"task", loaded.task->describe()},
          {"language_model", loaded.task->language_model()},
          {"checkpoint_step", loaded.step},
          {"attnlab_version", version == meta.end() ? "unknown" : version->second}};
}

// The directory's own name, however the path names it: "runs/rev/", "runs/rev/." and "." (in runs/rev) are all "rev".
std::string run_name(const std::string& run_path) {
  std::error_code ec;
  fs::path path = fs::absolute(run_path, ec).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  return path.filename().string();
}

}  // namespace

nlohmann::json read_csv_table(const std::string& path, const std::vector<std::string>& required) {
  const CsvTable table = read_csv(path, kMaxCsvBytes);  // a row cut mid-write is left out
  for (const std::string& c : required)
    if (std::find(table.columns.begin(), table.columns.end(), c) == table.columns.end()) {
      std::string header;
      for (const std::string& name : table.columns) header += (header.empty() ? "" : ",") + CsvWriter::escape(name);
      throw IoError(path + " has no column '" + c + "' (its header: " + header + ")");
    }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : table.rows) rows.push_back(row);
  return {{"columns", table.columns}, {"rows", std::move(rows)}, {"dropped_last_line", table.dropped_last_line}};
}

nlohmann::json report_run_data(const std::string& run_path, const std::vector<std::string>& inputs,
                               const PatchTexts& patch_pairs) {
  const RunDir run(run_path);
  run.require_directory();
  std::error_code ec;
  if (!fs::exists(run.config_path(), ec))
    throw IoError("'" + run_path + "' is not an attnlab run directory (no config.ini)");
  nlohmann::json metrics = read_csv_table(run.metrics_path(), {"step", "loss"});
  if (metrics["rows"].empty()) throw IoError(run.metrics_path() + " has no rows: the run logged no step");
  LoadedRun loaded = load_run(run);  // IoError without a complete checkpoint
  nlohmann::json data = {{"name", run_name(run_path)},
                         {"path", run_path},
                         {"settings", settings_data(run)},
                         {"summary", summary_data(run)},
                         {"metrics", metrics},
                         {"probes", probes_data(run)}};
  data["model"] = model_data(run, loaded);
  data["state"] = run_state(run);
  data["baselines"] = baselines_data(loaded);
  data.update(model_views(loaded, inputs, patch_pairs));
  return data;
}

}  // namespace attnlab::cli
