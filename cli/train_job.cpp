#include "cli/train_job.h"

#include <omp.h>

#include <cmath>
#include <csignal>

#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/load_run.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "framework/io/shell_quote.h"
#include "cli/signals.h"
#include "cli/test_seams.h"
#include "bench/cpu_info.h"
#include "framework/io/atomic_file.h"
#include "framework/io/checkpoint.h"
#include "framework/io/csv.h"
#include "framework/io/safetensors.h"
#include "training/distributed/launch.h"
#include "training/trainer.h"

namespace attnlab::cli {

namespace {

std::string fixed(double v, int digits) { return CsvWriter::format_fixed(v, digits); }

StepHooks& test_hooks() {
  static StepHooks hooks;
  return hooks;
}

// config.ini, given_options.ini and the vocabulary of a new run; a resumed run's are checked
// instead: an edited config.ini or a changed data file is refused, not trained on.
void prepare_run_files(const TrainJob& job, const Task& task) {
  const TrainSettings& s = job.settings;
  const RunDir& run = job.run;
  const std::string vocab = task.saved_vocab();
  if (!job.resume()) {
    write_file_atomic(run.config_path(), job.config_ini);
    write_file_atomic(run.given_options_path(), job.given_ini);
    if (!vocab.empty()) write_file_atomic(run_vocab_path(run), vocab);
    return;
  }
  if (!vocab.empty() && read_file(run_vocab_path(run)) != vocab)
    throw ValueError(s.task.file + " has changed since run '" + run.path() + "' started: its vocabulary is no longer " +
                     run_vocab_path(run) + "; start a new run");
  check_checkpoint_config(s.model, run.checkpoint_stem(run.latest_step()));
  check_checkpoint_options(run, job.config_ini, run.latest_step());
}

// The command that continues this run, quoted for a POSIX shell.
std::string resume_command(const TrainJob& job) {
  return launch_prefix() + "attnlab train --resume " + shell_quote(job.run.path()) + " --steps " + std::to_string(job.settings.steps);
}

// A resumed run refused for its latest checkpoint (corrupt, truncated, renamed):
// the line also says whether the one before it reads intact, and how to resume from it.
[[noreturn]] void refuse_latest_checkpoint(const TrainJob& job, const IoError& e) {
  const std::vector<int64_t> steps = job.run.checkpoint_steps();
  std::string note = "; no earlier checkpoint is kept (--keep), so the run cannot be resumed";
  if (steps.size() > 1) {
    const int64_t previous = steps[steps.size() - 2];
    const std::string stem = job.run.checkpoint_stem(previous), latest = job.run.checkpoint_stem(steps.back());
    try {
      check_checkpoint_step(load_safetensors(model_path(stem)).metadata, previous, model_path(stem));
      load_safetensors(optimizer_path(stem));
      note = "; the checkpoint before it (step " + std::to_string(previous) + ") is intact: to resume from it, move " +
             shell_quote(model_path(latest)) + " and " + shell_quote(optimizer_path(latest)) +
             " out of the run directory, then run: " + resume_command(job);
    } catch (const IoError&) {
      note = "; the checkpoint before it (step " + std::to_string(previous) + ") cannot be read either";
    }
  }
  throw IoError(e.what() + note);
}

// Stops on a NaN or Inf: nothing more is written; the last checkpoint stays the run's state.
int report_nonfinite(const TrainOutcome& out, const RunDir& run) {
  std::cerr << "attnlab train: " << out.problem << "; stopped (" << out.policy << "). ";
  auto steps = run.checkpoint_steps();
  if (steps.empty()) std::cerr << "No checkpoint had been written yet.\n";
  else std::cerr << "The last checkpoint (step " << steps.back() << ") is kept.\n";
  return kExitFailure;
}

int report_interrupted(const TrainOutcome& out, const TrainJob& job) {
  const int local = interrupt_signal(), signal = local ? local : SIGTERM;
  std::string by = local ? signal_name(local) : "a signal to another process of the run";
  // Open MPI's mpirun turns a Ctrl-C (and its own SIGTERM) into a SIGTERM to
  // every process: which of the two the user sent is not knowable here.
  if (local == SIGTERM && launched_size() > 1) by += " (mpirun sends it for a Ctrl-C too)";
  std::cerr << "attnlab train: interrupted by " << by << " after step " << out.last_step
            << "; checkpoint written. Resume with: " << resume_command(job) << "\n";
  return interrupt_exit_code(signal);
}

// train --report: the run's page, from its files as they are now. The run
// itself is done and kept whatever happens here, so a page that cannot be
// written is a note, not a failure of the run.
void write_run_report(const RunDir& run, bool quiet) {
  try {
    const std::string page = write_report({run.path()}, {}, "", false);
    if (!quiet) std::cout << "report: " << page << "\n";
  } catch (const std::exception& e) {
    std::cerr << "note: the report was not written: " << e.what() << "\n";
  }
}

void write_summary(const TrainOutcome& out, const TrainState& state, const RunDir& run) {
  const TrainSettings& s = state.settings();
  const HeldoutScore& held = out.heldout;
  nlohmann::json summary = {
      {"task", s.task.name},
      {"model", name_of(s.model.arch)},
      {"parameters", state.model().parameter_count()},
      {"steps", out.last_step},
      {"heldout_examples", state.heldout().size()},
      {"heldout_token_acc", held.accuracy.token},
      {"heldout_exact", held.accuracy.exact},
      {"target", s.target},
      {"target_patience", s.target_patience},
      {"solved_at_step", state.solved_at},
      {"target_first_reached_at_step", state.target_first_reached_at},
      {"seconds", out.seconds},
      {"threads", s.threads},
      {"precision", name_of(s.precision)},  // of the matrix products
      {"optimizer_state_bytes", state.optimizer().state_bytes()},  // rank 0's: 1/N of it with --shard-optimizer
      {"cpu", bench::cpu_model()},  // learning figures differ in their last bits between CPU kinds
  };
  const Communicator& comm = state.communicator();
  if (comm.size() > 1) summary["processes"] = comm.size();
  if (comm.size() > 1 && state.steps_run > 0) {  // rank 0's figures; every rank moves about as much
    const double steps = static_cast<double>(state.steps_run);
    const double received = static_cast<double>(state.step_traffic.bytes_received) / steps,
                 sent = static_cast<double>(state.step_traffic.bytes_sent) / steps;
    summary["comm_bytes_per_step"] = received + sent;
    summary["comm_bytes_received_per_step"] = received;
    summary["comm_bytes_sent_per_step"] = sent;
    summary["comm_seconds_per_step"] = state.step_traffic.seconds / steps;
  }
  if (std::isfinite(held.loss)) summary["heldout_loss"] = held.loss;  // teacher-forced, every task
  if (held.language_model && state.task().token_unit() == "character") {
    summary["heldout_bits_per_char"] = held.lm.bits_per_token;
    summary["heldout_chars"] = held.lm.tokens;
  } else if (held.language_model) {
    summary["heldout_bits_per_token"] = held.lm.bits_per_token;
    summary["heldout_tokens"] = held.lm.tokens;
  }
  if (std::isfinite(held.lm.in_context_loss)) {
    summary["heldout_in_context_loss"] = held.lm.in_context_loss;
    summary["heldout_late_token_acc"] = held.lm.late_token;
  }
  write_file_atomic(run.summary_path(), summary.dump(2) + "\n");
}

void print_result(const TrainOutcome& out, const TrainState& state, const RunDir& run) {
  const HeldoutScore& held = out.heldout;
  if (held.language_model) {
    const std::string unit = state.task().token_unit();
    std::cout << "held-out loss " << fixed(held.lm.loss, 4) << " nats = " << fixed(held.lm.bits_per_token, 3)
              << " bits per " << unit << ", next-" << unit << " accuracy " << fixed(100 * held.lm.token, 1) << "% on "
              << held.lm.tokens << " " << unit << "s after " << out.last_step << " steps (" << fixed(out.seconds, 1)
              << " s)\n";
    if (std::isfinite(held.lm.in_context_loss))
      std::cout << "in-context loss " << fixed(held.lm.in_context_loss, 4) << " nats (late " << fixed(held.lm.late_loss, 4)
                << " - early " << fixed(held.lm.early_loss, 4) << "), late-" << unit << " accuracy "
                << fixed(100 * held.lm.late_token, 1) << "%\n";
    std::cout << "run directory: " << run.path() << "\n";
    return;
  }
  std::cout << "held-out exact match " << fixed(100 * held.accuracy.exact, 1) << "%, token accuracy "
            << fixed(100 * held.accuracy.token, 1) << "% on " << state.heldout().size() << " examples after "
            << out.last_step << " steps (" << fixed(out.seconds, 1) << " s)";
  if (state.solved_at > 0) {
    std::cout << "; target " << fixed(100 * state.settings().target, 1) << "% reached at step " << state.solved_at;
    const int64_t patience = state.settings().target_patience;
    if (patience > 1) std::cout << " and held for " << patience << " evaluations";
  }
  std::cout << "\nrun directory: " << run.path() << "\n";
}

// The Trainer's options for this job: its files, the signals, the display.
TrainerOptions trainer_options(const TrainJob& job, Progress& progress, bool root) {
  TrainerOptions o;
  o.run_dir = job.run.path();
  o.resume = job.resume();
  o.stop_requested = [] { return interrupt_signal() != 0; };
  o.on_step = [&progress](const ProgressStats& stats) { progress.update(stats); };
  if (root) o.on_warning = [&progress](const std::string& warning) {
    progress.finish();  // a warning, printed even with --quiet: a skipped step is lost data
    std::cerr << "attnlab train: warning: " << warning << "\n";
  };
  o.hooks = test_hooks();
  o.on_checkpoint = [] { set_checkpoint_exists(); };
  o.checkpoint_metadata[kCheckpointOptionsKey] = job.config_ini;
  return o;
}

}  // namespace

void set_step_hooks_for_tests(StepHooks hooks) { test_hooks() = std::move(hooks); }

std::string launch_prefix() {
  const int processes = launched_size();
  return processes > 1 ? "mpirun -np " + std::to_string(processes) + " " : "";
}

TrainSession::TrainSession(const TrainJob& job) : job_(job) {
  const TrainSettings& s = job.settings;
  omp_set_num_threads(s.threads);
  state_ = std::make_unique<TrainState>(s);
  state_->set_communicator(*job.communicator);
  const bool root = job.communicator->is_root();
  if (job.resume()) set_checkpoint_exists();
  const bool quiet = job.quiet || !root;
  progress_ = std::make_unique<Progress>(job.resume() ? job.run.latest_step() + 1 : 1, s.steps, quiet, s.log_every);
  try {  // both read the latest checkpoint of a resumed run
    if (root) prepare_run_files(job, state_->task());
    TrainerOptions options = trainer_options(job, *progress_, root);
    if (root) options.on_finish = [this](const TrainOutcome& out) { write_summary(out, *state_, job_.run); };
    trainer_ = std::make_unique<Trainer>(*state_, std::move(options));
  } catch (const IoError& e) {
    const std::string latest = job.resume() ? job.run.checkpoint_stem(job.run.latest_step()) : "";
    const std::string what = e.what();
    if (latest.empty() || (what.find(model_path(latest)) == std::string::npos &&
                           what.find(optimizer_path(latest)) == std::string::npos))
      throw;
    refuse_latest_checkpoint(job, e);
  }
}

TrainSession::~TrainSession() = default;

int TrainSession::run() {
  const TrainJob& job = job_;
  const TrainSettings& s = job.settings;
  const TrainState& state = *state_;
  const bool root = job.communicator->is_root();
  const bool quiet = job.quiet || !root;
  if (!quiet) {
    progress_->message("task: " + state.task().describe());
    progress_->message("model: " + name_of(s.model.arch) + ", " + std::to_string(state.model().parameter_count()) +
                       " parameters; run: " + job.run.path() +
                       (job.resume() ? " (resuming at step " + std::to_string(state.step + 1) + ")" : ""));
    if (const TrainSet* set = state.train_set()) {
      const std::string n = std::to_string(set->size());
      progress_->message("data: a fixed set of " + n + " training examples, " +
                         (set->shuffled() ? "in batches of " + std::to_string(s.batch_size) + ", reshuffled every epoch"
                                          : "the whole set in one order every step (full batch)"));
    }
  }
  TrainOutcome out;
  try {
    out = trainer_->run();
  } catch (const RunWriteFailure& e) {
    progress_->finish();
    throw RunFailure(std::string(e.what()) + (e.intact_step < 0 ? "; the run directory is kept"
                                                                : " (continue with: " + resume_command(job) + ")"));
  }
  progress_->finish();
  if (!root) return out.end == TrainEnd::finished ? kExitOk : out.end == TrainEnd::nonfinite ? kExitFailure
                                                                                         : interrupt_exit_code(SIGTERM);
  if (out.end == TrainEnd::nonfinite) return report_nonfinite(out, job.run);
  if (out.end != TrainEnd::finished) {
    if (s.report) write_run_report(job.run, quiet);
    return report_interrupted(out, job);
  }
  if (s.report) write_run_report(job.run, quiet);  // summary.json is written (on_finish)
  if (!quiet) print_result(out, state, job.run);
  return kExitOk;
}

}  // namespace attnlab::cli
