#pragma once
// What `attnlab ablate` and the report's ablation view share: the held-out
// set as eval draws it, and the figures as one JSON object.
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cli/load_run.h"
#include "interventions/ablation.h"

namespace attnlab::cli {

// The first `count` held-out examples as eval draws them (count <= 0: as
// trained): a generated task's make_heldout with the run's seed, a file
// task's own held-out pairs, a text's held-out windows. IoError when a file
// task has none.
std::vector<Example> ablation_examples(const LoadedRun& loaded, int64_t count, const std::string& run_path);

// Teacher-forced batches of the examples scored by ablation (64 a batch).
constexpr int64_t kAblationBatch = 64;

// The figures as `attnlab ablate --json` prints them: mode, metric
// definitions, the intact row and the components' rows sorted by effect
// (sort_by_effect), the first `top` of them (top <= 0: all).
nlohmann::json ablation_json(const LoadedRun& loaded, const AblationResult& result, AblationMode mode, int64_t top);

// The rows sorted by effect, largest first: a sequence task by the drop in
// exact match, then the rise in loss; a language model by the rise in loss.
// Ties keep the components' forward order.
std::vector<AblationRow> sort_by_effect(const AblationResult& result, bool language_model);

// The report's ablation view: every component zero-ablated on the first
// kReportAblationExamples held-out examples (a generated task: at most its
// held-out set), fewer for a large model: as many as keep the passes under
// kReportAblationFlops, at least kReportAblationMinimum (cli/report_ablation.cpp);
// the figures of ablation_json; null for a run without held-out examples.
constexpr int64_t kReportAblationExamples = 200;
constexpr double kReportAblationFlops = 1e11;
constexpr size_t kReportAblationMinimum = 20;
nlohmann::json ablation_view_data(LoadedRun& loaded);

// The table on stdout: the intact row first, then the rows of ablation_json
// with their changes and an effect bar; the CSV file's text of the same rows.
void print_ablation_table(const nlohmann::json& figures, std::ostream& out);
std::string ablation_csv(const nlohmann::json& figures);

// Every pass's logits, kept for `ablate --logits FILE` (the PyTorch parity
// test reads them): the set's batches, resample's donors and, per pass
// (intact first), each batch's logits (B, T, V), as flat lists with shapes.
class AblationLogitsRecord {
 public:
  AblationLogits sink();
  nlohmann::json json(const TeacherForcedSet& set, const AblationResult& result, AblationMode mode, uint64_t seed) const;

 private:
  std::vector<std::vector<Tensor>> passes_;  // [row + 1][batch]
};

}  // namespace attnlab::cli
