// attnlab ablate: every head, MLP and layer of a trained run knocked out in
// turn (interventions/ablation.h), the held-out set scored for each.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/ablate.h"
#include "cli/command_line.h"
#include "cli/option_set.h"
#include "datasets/splits.h"
#include "framework/io/atomic_file.h"
#include "training/run_dir/claim.h"

namespace attnlab::cli {

namespace {

struct AblateArgs {
  std::string run_path, what, csv, logits;
  int64_t step = 0, heldout = 0, top = 0;
  AblationMode mode = AblationMode::zero;
  int threads = 1;
  uint64_t seed = 0;
  bool json = false, overwrite = false, together = false;
};

const char* const kAblateUsage =
    "usage: attnlab ablate --run DIR [--mode zero|mean|resample] [--what NAMES]\n"
    "                      [--together] [--heldout N] [--top K] [--json] [--csv FILE]\n\n"
    "Knocks out every attention head, every MLP and every layer of the run's\n"
    "model in turn (or the comma-separated components of --what, named as\n"
    "blocks.1.attn.h2, blocks.1.mlp, blocks.1; with --together all of them at\n"
    "once, one row named 'a + b') and scores the held-out set,\n"
    "teacher-forced, for each: exact match, token accuracy and loss (a\n"
    "language model: next-token accuracy and loss), beside the intact model's.\n"
    "Rows are sorted by effect, largest first (docs/interventions.md).\n"
    "zero sets the output to 0; mean puts in its mean over the set at each\n"
    "position; resample takes it from another example of the same lengths.\n\n";
const char* const kAblateExample =
    "\nexamples:\n  attnlab ablate --run runs/rev --top 5\n"
    "  attnlab ablate --run runs/rev --mode mean --what blocks.0.attn.h1,blocks.1\n"
    "  attnlab ablate --run runs/rev --together --what blocks.1.attn.h0,blocks.1.mlp\n";

// Whether `path` may be written by --csv or --logits: new, or an existing
// regular file with --overwrite; never a symlink, a directory or a device.
void check_output(const std::string& flag, const std::string& path, bool overwrite) {
  const std::string refuses = flag + " refuses to write '" + path + "': ";
  if (path.empty()) throw ValueError(flag + " needs a path, got an empty one");
  if (std::string why = protected_path_reason(path); !why.empty()) throw ValueError(refuses + "it is " + why);
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::symlink_status(path, ec);
  if (!std::filesystem::exists(status)) return;
  if (std::filesystem::is_symlink(status)) throw ValueError(refuses + "it is a symbolic link (attnlab does not write through one)");
  if (!std::filesystem::is_regular_file(status)) throw ValueError(refuses + "it is not a regular file");
  if (!overwrite) throw ValueError(refuses + "it exists; pass --overwrite to replace it");
}

// The parsed options, checked; false after --help.
bool parse_ablate(const Args& args, AblateArgs& a) {
  OptionSet opts("Options");
  opts.description().add_options()
      ("run", po::value(&a.run_path), "the run directory (required)")
      ("step", po::value(&a.step), "the checkpoint to use (default: the latest)");
  opts.add("mode", &a.mode, "how a component is knocked out: {}", false)
      .add("what", &a.what, "comma-separated components (default: every head, MLP and layer)", false)
      .flag("together", &a.together, "knock out the --what components at the same time: one row", false)
      .add("heldout", &a.heldout, "number of held-out examples, >= 1 (default: as trained)", false)
      .add("top", &a.top, "keep the K largest effects, K >= 1 (default: all)", false)
      .flag("json", &a.json, "print one JSON object instead of the table", false)
      .add("csv", &a.csv, "also write the table to this CSV file", false)
      .add("logits", &a.logits, "write the set's batches and each pass's logits to this JSON file (tests)", false)
      .flag("overwrite", &a.overwrite, "let --csv and --logits replace an existing file", false)
      .add("threads", &a.threads, "OpenMP threads", false)
      .add("seed", &a.seed, "seed of resample's donors", false);
  po::options_description all = options_with_help();
  all.add(opts.description());
  po::variables_map vm;
  if (!parse_command_line(args, all, vm, kAblateUsage, kAblateExample)) return false;
  check_run_and_step(vm, a.run_path, a.step);
  if (a.together && vm["what"].defaulted())
    throw ValueError("--together needs --what: the components to knock out at the same time");
  if (!vm["heldout"].defaulted() && a.heldout < 1)
    throw ValueError("--heldout must be >= 1, got " + std::to_string(a.heldout));
  if (a.heldout > 10000000) throw ValueError("--heldout must be <= 10000000, got " + std::to_string(a.heldout));
  if (!vm["top"].defaulted() && a.top < 1) throw ValueError("--top must be >= 1, got " + std::to_string(a.top));
  if (a.threads < 1 || a.threads > 1024) throw ValueError("--threads must be in [1, 1024], got " + std::to_string(a.threads));
  if (!vm["csv"].defaulted()) check_output("--csv", a.csv, a.overwrite);
  if (!vm["logits"].defaulted()) check_output("--logits", a.logits, a.overwrite);
  return true;
}

// The names of --what, split at commas, spaces trimmed.
std::vector<std::string> split_names(const std::string& what) {
  std::vector<std::string> names;
  std::stringstream in(what);
  for (std::string name; std::getline(in, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name.empty()) throw ValueError("--what has an empty component name in '" + what + "'");
    names.push_back(name);
  }
  if (names.empty()) throw ValueError("--what needs component names, got an empty list");
  return names;
}

}  // namespace

std::vector<Example> ablation_examples(const LoadedRun& loaded, int64_t count, const std::string& run_path) {
  if (const std::vector<Example>* own = loaded.task->own_heldout()) {
    if (own->empty()) throw IoError("run '" + run_path + "' has no held-out examples to ablate on: " + loaded.task->describe());
    const size_t n = count > 0 ? std::min<size_t>(static_cast<size_t>(count), own->size()) : own->size();
    return std::vector<Example>(own->begin(), own->begin() + static_cast<std::ptrdiff_t>(n));
  }
  const TrainSettings& s = loaded.settings;
  return make_heldout(*loaded.task, count > 0 ? count : s.heldout, derive_seed(s.seed, kHeldoutStream)).examples();
}

std::vector<AblationRow> sort_by_effect(const AblationResult& result, bool language_model) {
  std::vector<AblationRow> rows = result.rows;
  std::stable_sort(rows.begin(), rows.end(), [language_model](const AblationRow& a, const AblationRow& b) {
    if (!language_model && a.score.exact != b.score.exact) return a.score.exact < b.score.exact;
    return a.score.loss > b.score.loss;
  });
  return rows;
}

int run_ablate(const Args& args) {
  AblateArgs a;
  if (!parse_ablate(args, a)) return kExitOk;
  omp_set_num_threads(a.threads);
  LoadedRun loaded = load_run(RunDir(a.run_path), a.step);
  const TransformerConfig& c = loaded.model->config();
  const std::vector<Component> components = a.what.empty() ? model_components(c) : components_named(c, split_names(a.what));
  const std::vector<Example> examples = ablation_examples(loaded, a.heldout, a.run_path);
  const TeacherForcedSet set = teacher_forced_set(c, loaded.task->language_model(), examples, kAblationBatch, loaded.task.get());
  AblationLogitsRecord record;
  const AblationLogits sink = a.logits.empty() ? AblationLogits() : record.sink();
  const AblationResult result = a.together ? ablate_groups(*loaded.model, set, {components}, a.mode, a.seed, sink)
                                           : ablate(*loaded.model, set, components, a.mode, a.seed, sink);
  nlohmann::json out = ablation_json(loaded, result, a.mode, a.top);
  out["run"] = a.run_path;
  if (!a.csv.empty()) write_file_atomic(a.csv, ablation_csv(out));
  if (!a.logits.empty()) write_file_atomic(a.logits, record.json(set, result, a.mode, a.seed).dump());
  if (a.json) std::cout << out.dump() << "\n";
  else print_ablation_table(out, std::cout);
  return kExitOk;
}

}  // namespace attnlab::cli
