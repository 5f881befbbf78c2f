#pragma once
// What `attnlab report` reads from a run directory, as the JSON object the
// page (cli/report/*.js) draws: everything comes from the run's files
// (config.ini, metrics.csv, summary.json, probe_*.csv, the latest checkpoint),
// never from a process that trained it.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnlab::cli {

// The report's --clean and --corrupt inputs, pair by pair (activation patching).
using PatchTexts = std::vector<std::pair<std::string, std::string>>;

// A CSV file as {"columns": [...], "rows": [[text, ...], ...],
// "dropped_last_line": bool}, every value kept as the file's text so the page
// shows the file's own digits. An incomplete last line (a run writing, or a
// crash mid-write) is left out and dropped_last_line says so. IoError naming the
// file and line for a row whose field count is not the header's, or for a
// missing column of `required`.
nlohmann::json read_csv_table(const std::string& path, const std::vector<std::string>& required);

// One run: name, path, settings (all; those differing from the defaults;
// given: those the user gave, and resolved: differing but not given, both null
// for a run without given_options.ini), model (config, parameters, task,
// language_model: whether it predicts text), state ("running", "finished" or
// "interrupted"), baselines (a language model's unigram and bigram bits per
// held-out character, datasets/text_baselines.h; else null), summary, metrics,
// probes (when recorded), attention maps for the first
// held-out examples and for each of `inputs`, held-out examples with the
// model's answers, and interventions.patching for each pair of `patch_pairs`.
// IoError (exit 2) for a missing or malformed file.
nlohmann::json report_run_data(const std::string& run_path, const std::vector<std::string>& inputs,
                               const PatchTexts& patch_pairs = {});

}  // namespace attnlab::cli

namespace attnlab::cli {

struct LoadedRun;

// What the trained model does (cli/report_model.cpp): "attention", one entry
// per example (held-out inputs first, then `inputs`) with every layer's
// weights per head, "examples", held-out inputs with the model's answers, and
// "interventions" (patching: one entry per pair of `patch_pairs`).
nlohmann::json model_views(LoadedRun& loaded, const std::vector<std::string>& inputs, const PatchTexts& patch_pairs = {});

// What `attnlab patch --json` prints for each clean and corrupted pair (cli/report_patching.cpp).
nlohmann::json patching_views(LoadedRun& loaded, const PatchTexts& patch_pairs);

}  // namespace attnlab::cli
