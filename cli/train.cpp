// attnlab train: train a model on a task, or --resume a run.
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "cli/command_line.h"
#include "cli/decide_together.h"
#include "training/distributed/launch.h"
#include "cli/run_settings.h"
#include "training/run_dir/claim.h"
#include "framework/io/shell_quote.h"
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
  const double d = static_cast<double>(m.d_model), L = static_cast<double>(m.n_layers) * (m.arch == Arch::seq2seq ? 2 : 1);
  // Q, K (d -> h d_k), V (d -> h d_v) and the output (h d_v -> d): --d-k sets their width, not only d.
  const double h = static_cast<double>(m.n_heads);
  const double qkv = m.parameter_free_attention ? 0 : h * static_cast<double>(2 * m.head_dim_k() + 2 * m.head_dim_v());
  const double d_ff = m.attention_only ? 0 : static_cast<double>(m.d_ff);  // attention-only blocks have no feed-forward
  const double params = static_cast<double>(m.vocab_size) * d + L * (qkv * d + 2 * d * d_ff);
  const double B = static_cast<double>(s.batch_size), t = static_cast<double>(T);
  const double activations = L * B * t * (h * t + d_ff);
  const double table = static_cast<double>(m.max_len) * d;
  const double heldout = static_cast<double>(s.heldout) * t;
  return sizeof(float) * (4 * params + activations + table + heldout);
}

// Refuses a run that cannot fit in this machine's memory, before anything is written.
void check_memory(const TrainSettings& s) {
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  const double needed = min_training_bytes(s, needed_positions(*make_task(s.task), s.model));
  auto gib = [](double bytes) { return std::to_string(static_cast<long long>(std::ceil(bytes / (1 << 30)))); };
  if (memory > 0 && needed > memory)
    throw ValueError("this run needs more than " + gib(needed) + " GiB of memory, this machine has " + gib(memory) +
                     " GiB; lower --batch-size, --d-model, --d-k, --d-v, --d-ff, --layers, --heads, --heldout or the sequence length");
}

const char* const kTrainUsage =
    "usage: attnlab train [options]\n\n"
    "Trains a transformer on a generated sequence task, evaluates it on\n"
    "held-out examples (greedy decoding, exact match) every --eval-every steps,\n"
    "checkpoints, and stops at --steps or once held-out exact match reaches\n"
    "--target. Writes a run directory: config.ini, metrics.csv, checkpoints/\n"
    "(safetensors), summary.json.\n"
    "SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed; not under nohup)\n"
    "stop it cleanly: the current step is finished (a held-out evaluation under\n"
    "way is abandoned, and done first by --resume) and checkpointed; exit code\n"
    "130, 143 or 129 (128 + the signal). A second SIGINT or SIGTERM exits at\n"
    "once, keeping the last checkpoint.\n\n";
const char* const kTrainExamples =
    "\nexamples:\n"
    "  attnlab train --task reverse --run runs/rev\n"
    "  attnlab train --task add --model decoder --layers 2 --steps 3000 \\\n"
    "      --run runs/add\n"
    "  attnlab train --config runs/rev/config.ini --seed 1 --run runs/rev-seed1\n"
    "  attnlab train --resume runs/rev --steps 4000\n";

OptionSet general_options(TrainJob& job) {
  OptionSet general("General");
  general.add("run", &job.run_path, "run directory to create (default runs/<task>-<model>)", false)
      .add("config", &job.config_file, "read options from an INI file (name = value, as the long flags); flags win", false)
      .add("resume", &job.resume_path, "continue the run in this directory from its latest checkpoint (--steps may be raised)", false)
      .flag("overwrite", &job.overwrite, "replace an existing run directory", false)
      .flag("quiet", &job.quiet, "print nothing but errors", false)
      .flag("check", &job.check_only, "validate the options (and --config file), print the resolved config and exit; writes nothing",
            false);
  return general;
}

// A resumed run is the same experiment: only how long it runs, how it reports
// and how many threads and micro-batches it uses (which change its bits) may change. Its
// config.ini becomes the config file; unless --check, the run is locked from
// here to the end (returned).
std::optional<RunClaim> prepare_resume(TrainJob& job, const po::variables_map& vm, const OptionSet& experiment,
                                       bool root) {
  if (!job.config_file.empty()) throw ValueError("--resume reads the run's own config.ini; drop --config");
  for (const auto& [name, value] : vm)
    if (!value.defaulted() && experiment.description().find_nothrow(name, false) && !resume_may_change(name))
      throw ValueError("--" + name + " cannot change when resuming (it is part of the run's config.ini); start a new run instead");
  if (!job.run_path.empty() && job.run_path != job.resume_path) throw ValueError("--resume and --run name different directories");
  std::optional<RunClaim> claim;
  if (job.check_only || !root) RunDir(job.resume_path).require_trained();  // --check writes nothing, not even the lock file
  else claim = RunClaim::resume(RunDir(job.resume_path));
  job.config_file = RunDir(job.resume_path).config_path();
  job.run_path = job.resume_path;
  return claim;
}

// Runs `checks`; a value they refuse may come from --config FILE, which the
// message then names (a resumed run's config.ini is its own: not named).
template <class Checks>
void naming_config_file(const TrainJob& job, Checks&& checks) {
  try {
    checks();
  } catch (const ValueError& e) {
    if (job.config_file.empty() || job.resume()) throw;
    throw ValueError(std::string(e.what()) + " (with --config " + job.config_file + ")");
  }
}

// The config file's values under the command line's, then the settings checked and completed.
void resolve_settings(TrainSettings& s, TrainJob& job, const OptionSet& experiment, po::variables_map& vm) {
  if (!job.config_file.empty()) {
    store_config_file(job.config_file, experiment.description(), vm);
    // notify() assigns every stored value again, the general options'
    // defaults included: keep what the command line said about them.
    const std::string run_given = job.run_path;
    naming_config_file(job, [&] { po::notify(vm); });  // parses the choices (--model, --norm, ...)
    job.run_path = run_given;
    if (job.resume()) read_missing_init_as_torch(vm, s);
  }
  naming_config_file(job, [&] {
    check_given_flags(s, job.given);
    finalize(s);
  });
  check_heldout(s);
  check_memory(s);
  check_gemm_precision(s.precision, "--precision");  // here, not in finalize: eval reads a bf16 run anywhere
}

// Each optimizer step's batch is split into processes x --grad-accum micro-batches of equal size.
void check_processes(const TrainSettings& s) {
  const int64_t n = launched_size(), parts = n * s.grad_accum;
  if (s.batch_size % parts != 0)
    throw ValueError("--batch-size " + std::to_string(s.batch_size) + " does not split into " + std::to_string(n) +
                     " processes x --grad-accum " + std::to_string(s.grad_accum) + " = " + std::to_string(parts) +
                     " micro-batches of equal size; choose a multiple of " + std::to_string(parts));
}

// The lines of the resolved `ini` whose option the user gave (`vm`: the
// command line and --config FILE; any other value is a default or resolved).
std::string given_lines(const std::string& ini, const po::variables_map& vm) {
  std::string out = "# attnlab train: the options given (on the command line or by --config); config.ini has all\n";
  std::istringstream in(ini);
  for (std::string line; std::getline(in, line);) {
    const std::string name = line.substr(0, line.find(" = "));
    if (vm.count(name) && !vm[name].defaulted()) out += line + "\n";
  }
  return out;
}

// The run directory and config.ini of `job`, whose command line is resolved into `s`.
void complete_job(TrainJob& job, const TrainSettings& s, const OptionSet& experiment) {
  job.settings = s;
  job.run = RunDir(job.run_path.empty() ? "runs/" + s.task.name + "-" + name_of(s.model.arch) : job.run_path);
  // The process count changes no option but must be repeated: the command says it.
  job.config_ini = "# attnlab train: resolved options; repeat with  " + launch_prefix() + "attnlab train --config " +
                   shell_quote(job.run.config_path()) + " --run NEW_DIR\n" + experiment.to_ini();
  // A run stopped in its last step's evaluation is resumed at that step, to finish it.
  const bool owes_last = job.resume() && job.run.latest_step() == s.steps &&
                         owes_evaluation(job.run.checkpoint_stem(s.steps));
  if (job.resume() && job.run.latest_step() >= s.steps && !owes_last)
    throw ValueError("run '" + job.run.path() + "' is already at step " + std::to_string(job.run.latest_step()) +
                     "; pass --steps N with N > " + std::to_string(job.run.latest_step()) + " to continue it");
}

// Everything before the first step, on every process: the options, the run
// directory's claim (by the root process), the data, the model and the run's
// files. `session` stays empty for --help and --check, which print and end.
void prepare_training(const Args& args, const Communicator& communicator, TrainJob& job, std::optional<RunClaim>& claim,
                      std::optional<TrainSession>& session) {
  TrainSettings s = default_settings();
  OptionSet experiment = all_train_options(s);
  po::options_description all = options_with_help();
  all.add(general_options(job).description()).add(experiment.description());
  po::variables_map vm;  // command-line values win: they are stored first
  if (!parse_command_line(args, all, vm, kTrainUsage, kTrainExamples)) return;
  job.given = given_options(vm);  // before --config adds its values: check_given_flags checks what the user wrote
  for (const char* path : {"run", "resume", "config"})
    if (job.given.count(path) && vm[path].as<std::string>().empty())
      throw ValueError(std::string("--") + path + " needs a path, got an empty one");
  if (job.resume()) claim = prepare_resume(job, vm, experiment, communicator.is_root());
  resolve_settings(s, job, experiment, vm);
  if (job.check_only) {
    if (communicator.is_root()) std::cout << experiment.to_ini();
    return;
  }
  check_processes(s);
  complete_job(job, s, experiment);
  job.given_ini = given_lines(experiment.to_ini(), vm);
  job.communicator = &communicator;
  if (communicator.is_root() && !job.resume()) claim = RunClaim::start(job.run, job.overwrite);  // before config.ini is written
  session.emplace(job);
}

}  // namespace

int run_train(const Args& args) {
  // From the first instant: a signal while the run directory is claimed asks
  // the run to stop after its first step, checkpointed, as one during a step
  // does; it never ends the process with a directory half claimed.
  const InterruptGuard interrupts;
  // First, so that every refusal below is decided by all processes together.
  const std::unique_ptr<Communicator> communicator = start_communicator();
  TrainJob job;
  std::optional<RunClaim> claim;
  std::optional<TrainSession> session;
  try {
    decide_together(*communicator, "train", [&] { prepare_training(args, *communicator, job, claim, session); });
  } catch (...) {  // refused before the first step (by any process): a new run leaves nothing behind
    session.reset();
    if (claim) claim->undo();
    throw;
  }
  if (!session) return interrupt_signal() ? interrupt_exit_code(interrupt_signal()) : kExitOk;  // --help, --check
  // From here on the run's record (metrics.csv, config.ini) is the user's: a failure keeps it.
  try {
    return session->run();
  } catch (const RunFailure&) {
    throw;  // every process throws it after the same step (training/trainer.h): rank 0 prints it
  } catch (...) {
    end_every_process(*communicator, "train");
  }
}

}  // namespace attnlab::cli
