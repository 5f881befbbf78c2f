// attnlab patch: activation patching of a trained run (interventions/patching.h)
// for a clean and a corrupted input, or averaged over held-out inputs with one
// symbol changed (docs/interventions.md, "Activation patching").
#include <omp.h>

#include <iostream>

#include "cli/command_line.h"
#include "cli/patching.h"
#include "framework/io/atomic_file.h"

namespace attnlab::cli {

namespace {

const char* const kPatchUsage =
    "usage: attnlab patch --run DIR --clean \"INPUT\" --corrupt \"INPUT\" [options]\n"
    "       attnlab patch --run DIR --corrupt-token K [--heldout N] [options]\n\n"
    "Runs a clean and a corrupted input, then copies one activation of the clean\n"
    "run into the corrupted run at a time: the residual stream at every (layer,\n"
    "position) and every head's output (all positions; --per-position: each).\n"
    "Prints the fraction of the logit difference restored,\n"
    "  (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt),\n"
    "LD = logit(clean answer token) - logit(corrupt answer token) at each answer\n"
    "position where the two answers (the task's) differ. Decoders and seq2seq\n"
    "read the clean answer in both runs (teacher forcing); a language model's\n"
    "answer is its next character. --corrupt-token K changes the symbol at input\n"
    "position K (0 = the first) of N held-out inputs and averages their LDs.\n\n";
const char* const kPatchExample =
    "\nexamples:\n  attnlab patch --run runs/rev --clean \"3 1 4 1 5\" --corrupt \"3 1 2 1 5\"\n"
    "  attnlab patch --run runs/rev --corrupt-token 2 --heldout 50 --json\n";

struct PatchArgs {
  std::string run_path, clean, corrupt, logits;
  int64_t step = 0, corrupt_token = -1, heldout = 20;
  uint64_t seed = 1;
  int threads = 1;
  bool per_position = false, json = false;
};

// ValueError for a combination of flags that asks for nothing or for two things.
void check_args(const po::variables_map& vm, const PatchArgs& a) {
  check_run_and_step(vm, a.run_path, a.step);
  const bool pair = vm.count("clean") || vm.count("corrupt"), generated = vm.count("corrupt-token") > 0;
  if (pair && generated) throw ValueError("--corrupt-token generates the corrupted inputs; give it or --clean and --corrupt, not both");
  if (!pair && !generated) throw ValueError("nothing to patch: give --clean and --corrupt, or --corrupt-token K");
  if (pair && !(vm.count("clean") && vm.count("corrupt")))
    throw ValueError(std::string("--") + (vm.count("clean") ? "clean" : "corrupt") + " needs --" +
                     (vm.count("clean") ? "corrupt" : "clean") + " beside it");
  if (vm.count("heldout") && !generated) throw ValueError("--heldout counts the inputs of --corrupt-token; it needs it");
  if (generated && a.corrupt_token < 0)
    throw ValueError("--corrupt-token must be >= 0 (0 = the first position), got " + std::to_string(a.corrupt_token));
  if (a.heldout < 1 || a.heldout > 100000) throw ValueError("--heldout must be in [1, 100000], got " + std::to_string(a.heldout));
  if (vm.count("logits") && !pair) throw ValueError("--logits writes one pair's logits; it needs --clean and --corrupt");
  if (vm.count("logits") && a.logits.empty()) throw ValueError("--logits needs a path, got an empty one");
  if (a.threads < 1 || a.threads > 1024) throw ValueError("--threads must be in [1, 1024], got " + std::to_string(a.threads));
}

nlohmann::json logits_json(const Tensor& t) {  // (T, V) as rows
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t i = 0; i < t.size(0); ++i) rows.push_back(std::vector<Real>(t.data() + i * t.size(1), t.data() + (i + 1) * t.size(1)));
  return rows;
}

nlohmann::json ids_json(const ModelInput& in) {
  return {{"src", in.src.numel() ? nlohmann::json({in.src.data}) : nlohmann::json()},
          {"tgt_in", in.tgt_in.numel() ? nlohmann::json({in.tgt_in.data}) : nlohmann::json()}};
}

// --logits FILE: the ids both runs read, their logits, and every patch with the logits it gave
// (tests/test_patching_torch_parity.py compares them with scripts/pytorch/torch_patch.py).
std::string logits_file(const PatchInputs& in, const std::vector<Patch>& patches, const PatchingRun& run) {
  const PatchingPair& pair = in.pairs.front();
  nlohmann::json out = {{"clean", ids_json(format_batch(in.format, {{pair.clean, pair.answer}}).input)},
                        {"corrupt", ids_json(format_batch(in.format, {{pair.corrupt, pair.answer}}).input)},
                        {"clean_logits", logits_json(run.clean_logits.front())},
                        {"corrupt_logits", logits_json(run.corrupt_logits.front())},
                        {"patches", nlohmann::json::array()}};
  for (size_t p = 0; p < patches.size(); ++p) {
    nlohmann::json regions = nlohmann::json::array();
    for (const PatchRegion& r : patches[p].regions)
      regions.push_back({{"point", r.point}, {"position", r.position}, {"begin", r.begin}, {"width", r.width}});
    out["patches"].push_back({{"name", patches[p].name}, {"position", patches[p].position}, {"regions", regions},
                              {"logits", logits_json(run.patched_logits[p])}});
  }
  return out.dump() + "\n";
}

}  // namespace

int run_patch(const Args& args) {
  PatchArgs a;
  po::options_description opts = options_with_help("Options");
  opts.add_options()
      ("run", po::value(&a.run_path), "the run directory (required)")
      ("clean", po::value(&a.clean), "the clean input, as the task writes it")
      ("corrupt", po::value(&a.corrupt), "the corrupted input, of the clean one's length")
      ("corrupt-token", po::value(&a.corrupt_token), "generate the corruption: change input position K (0 = first)")
      ("heldout", po::value(&a.heldout), "with --corrupt-token: how many held-out inputs (default 20)")
      ("seed", po::value(&a.seed), "with --corrupt-token: the seed of the symbols drawn (default 1)")
      ("per-position", po::bool_switch(&a.per_position), "patch every head at each position too")
      ("step", po::value(&a.step), "the checkpoint to use (default: the latest)")
      ("threads", po::value(&a.threads)->default_value(1), "OpenMP threads")
      ("json", po::bool_switch(&a.json), "print everything as one JSON object")
      ("logits", po::value(&a.logits), "write the patched logits of a --clean/--corrupt pair to FILE (JSON)");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm, kPatchUsage, kPatchExample)) return kExitOk;
  check_args(vm, a);
  omp_set_num_threads(a.threads);

  LoadedRun loaded = load_run(RunDir(a.run_path), a.step);
  const PatchInputs in = a.corrupt_token >= 0 ? pairs_from_corrupt_token(loaded, a.corrupt_token, a.heldout, a.seed)
                                              : pair_from_texts(loaded, a.clean, a.corrupt);
  const std::vector<Patch> patches = all_patches(loaded.model->config(), in, a.per_position);
  PatchingOptions options;
  options.keep_logits = !a.logits.empty();
  const PatchingRun run = run_patching(*loaded.model, in.format, in.pairs, patches, options);
  const nlohmann::json result = patching_json(loaded, a.run_path, in, patches, run);
  if (!a.logits.empty()) write_file_atomic(a.logits, logits_file(in, patches, run));
  if (a.json) std::cout << result.dump() << "\n";
  else print_patching(result);
  return kExitOk;
}

}  // namespace attnlab::cli
