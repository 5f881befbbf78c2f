// attnlab train: train a model on a task, or --resume a run.
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>

#include "cli/command_line.h"
#include "cli/run_claim.h"
#include "cli/train_job.h"

namespace attnlab::cli {

namespace {

// A lower bound of what one training step holds in memory, in bytes:
// parameters with gradient and two optimizer moments, per layer the attention
// weights (B, h, T, T) and feed-forward activations (B, T, d_ff) kept for
// backward, the positional table and the held-out set. Well below the truth;
// it only turns a certain out-of-memory crash into a message.
double min_training_bytes(const TrainSettings& s, int64_t T) {
  const TransformerConfig& m = s.model;
  const double d = static_cast<double>(m.d_model), L = static_cast<double>(m.n_layers) * (m.arch == "seq2seq" ? 2 : 1);
  // Q, K (d -> h d_k), V (d -> h d_v) and the output (h d_v -> d): --d-k sets their width, not only d.
  const double h = static_cast<double>(m.n_heads);
  const double qkv = m.parameter_free_attention ? 0 : h * static_cast<double>(2 * m.head_dim_k() + 2 * m.head_dim_v());
  const double params = static_cast<double>(m.vocab_size) * d + L * (qkv * d + 2 * d * static_cast<double>(m.d_ff));
  const double B = static_cast<double>(s.batch_size), t = static_cast<double>(T);
  const double activations = L * B * t * (h * t + static_cast<double>(m.d_ff));
  const double table = static_cast<double>(m.max_len) * d;
  const double heldout = static_cast<double>(s.heldout) * t;
  return sizeof(float) * (4 * params + activations + table + heldout);
}

// Refuses a run that cannot fit in this machine's memory, before anything is written.
void check_memory(const TrainSettings& s) {
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  const double needed = min_training_bytes(s, needed_positions(*make_task(s.task), s.model.arch));
  auto gib = [](double bytes) { return std::to_string(static_cast<long long>(std::ceil(bytes / (1 << 30)))); };
  if (memory > 0 && needed > memory)
    throw ValueError("this run needs more than " + gib(needed) + " GiB of memory, this machine has " + gib(memory) +
                     " GiB; lower --batch-size, --d-model, --d-k, --d-v, --d-ff, --layers, --heads, --heldout or the sequence length");
}

}  // namespace

int run_train(const Args& args) {
  TrainSettings s = default_settings();
  OptionSet experiment = all_train_options(s);
  std::string run_path, config_file, resume_path;
  bool quiet = false, overwrite = false, check_only = false;
  OptionSet general("General");
  general.add("run", &run_path, "run directory to create (default runs/<task>-<model>)", false)
      .add("config", &config_file, "read options from an INI file (name = value, as the long flags); flags win", false)
      .add("resume", &resume_path, "continue the run in this directory from its latest checkpoint (--steps may be raised)", false)
      .flag("overwrite", &overwrite, "replace an existing run directory", false)
      .flag("quiet", &quiet, "print nothing but errors", false)
      .flag("check", &check_only, "validate the options (and --config file), print the resolved config and exit; writes nothing",
            false);
  po::options_description all = options_with_help();
  all.add(general.description()).add(experiment.description());

  po::variables_map vm;  // command-line values win: they are stored first
  if (!parse_command_line(args, all, vm,
                          "usage: attnlab train [options]\n\n"
                          "Trains a transformer on a generated sequence task, evaluates it on held-out examples\n"
                          "(greedy decoding, exact match) every --eval-every steps, checkpoints, and stops at\n"
                          "--steps or once held-out exact match reaches --target. Writes a run directory:\n"
                          "config.ini, metrics.csv, checkpoints/ (safetensors), summary.json.\n"
                          "SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed; not under nohup) stop it\n"
                          "cleanly: the current step is finished (a held-out evaluation under way is abandoned) and\n"
                          "checkpointed; exit code 130, 143 or 129 (128 + the signal). A second SIGINT or SIGTERM\n"
                          "exits at once, keeping the last checkpoint.\n\n",
                          "\nexamples:\n"
                          "  attnlab train --task reverse --run runs/rev\n"
                          "  attnlab train --task add --model decoder --layers 2 --steps 3000 --run runs/add\n"
                          "  attnlab train --config runs/rev/config.ini --seed 1 --run runs/rev-seed1\n"
                          "  attnlab train --resume runs/rev --steps 4000\n"))
    return kExitOk;
  const std::set<std::string> given = given_options(vm);  // before --config adds its values
  if (!resume_path.empty() && !config_file.empty()) throw ValueError("--resume reads the run's own config.ini; drop --config");
  std::optional<RunClaim> claim;
  if (!resume_path.empty()) {
    // A resumed run is the same experiment: only how long it runs, how it
    // reports and how many threads it uses (which changes its bits) may change.
    const std::set<std::string> may_change = {"steps", "threads", "eval-every", "log-every", "keep", "target", "on-nan", "probe-every"};
    for (const auto& [name, value] : vm)
      if (!value.defaulted() && experiment.description().find_nothrow(name, false) && !may_change.count(name))
        throw ValueError("--" + name + " cannot change when resuming (it is part of the run's config.ini); start a new run instead");
    if (!run_path.empty() && run_path != resume_path) throw ValueError("--resume and --run name different directories");
    if (check_only) RunDir(resume_path).require_trained();  // --check writes nothing, not even the lock file
    else claim = RunClaim::resume(RunDir(resume_path));     // locked from here to the end of the run
    config_file = RunDir(resume_path).config_path();
    run_path = resume_path;
  }
  if (!config_file.empty()) {
    store_config_file(config_file, experiment.description(), vm);
    // notify() assigns every stored value again, the general options'
    // defaults included: keep what the command line said about them.
    const std::string run_given = run_path;
    po::notify(vm);
    run_path = run_given;
  }
  try {
    check_given_flags(s, given);
    finalize(s);
  } catch (const ValueError& e) {
    if (config_file.empty() || !resume_path.empty()) throw;
    throw ValueError(std::string(e.what()) + " (with --config " + config_file + ")");
  }
  check_heldout(s);
  check_memory(s);
  if (check_only) {
    std::cout << experiment.to_ini();
    return kExitOk;
  }
  if (run_path.empty()) run_path = "runs/" + s.task.name + "-" + s.model.arch;

  TrainJob job;
  job.settings = s;
  job.run = RunDir(run_path);
  job.resume = !resume_path.empty();
  job.quiet = quiet;
  job.config_ini = "# attnlab train: resolved options; repeat with  attnlab train --config " + job.run.config_path() +
                   " --run NEW_DIR\n" + experiment.to_ini();
  if (job.resume) {
    if (job.run.latest_step() >= s.steps)
      throw ValueError("run '" + run_path + "' is already at step " + std::to_string(job.run.latest_step()) +
                       "; pass --steps N with N > " + std::to_string(job.run.latest_step()) + " to continue it");
  } else {
    claim = RunClaim::start(job.run, overwrite);  // created (or replaced) and locked before config.ini is written
  }
  try {
    return train(job);
  } catch (...) {
    // A run that failed before its first checkpoint has nothing to resume: leave nothing behind.
    if (claim && job.run.checkpoint_steps().empty()) claim->undo();
    throw;
  }
}

}  // namespace attnlab::cli
