#include "cli/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/evaluate.h"
#include "cli/load_run.h"
#include "cli/progress.h"
#include "cli/signals.h"
#include "datasets/splits.h"
#include "framework/io/atomic_file.h"
#include "framework/io/checkpoint.h"
#include "framework/io/csv.h"
#include "framework/ops/loss.h"
#include "framework/optim/optim.h"
#include "framework/probe/training_probe.h"
#include "models/batch.h"

namespace attnlab::cli {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kInitStream = 3;

const std::vector<std::string> kMetricColumns = {
    "step", "loss", "lr", "grad_norm", "train_token_acc", "train_exact", "heldout_token_acc", "heldout_exact",
    "tokens_per_s", "elapsed_s", "heldout_loss"};  // heldout_loss: language models (text) only

std::string fixed(double v, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << v;
  return out.str();
}

// Keeps the metric rows up to `last_step` (a resumed run redoes later steps).
// Only complete rows count: a run killed mid-write leaves an unterminated one.
void truncate_metrics(const std::string& path, int64_t last_step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  const std::string content = read_file(path);
  std::string kept;
  for (size_t begin = 0, end; (end = content.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string line = content.substr(begin, end + 1 - begin);
    char* rest = nullptr;
    const long long step = std::strtoll(line.c_str(), &rest, 10);
    if (begin == 0 || (rest != line.c_str() && *rest == ',' && step <= last_step)) kept += line;
  }
  write_file_atomic(path, kept);
}

// Temporary files that a killed write_file_atomic left behind (".NAME.tmp.XXXXXX").
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos) fs::remove(entry.path(), ec);
  }
}

// Test hook for --on-nan: ATTNLAB_DEBUG_NAN_AT_STEP=N makes step N's gradient
// of parameter ATTNLAB_DEBUG_NAN_PARAM (default: the last one) NaN, or its
// loss when that is "loss". With ATTNLAB_DEBUG_NAN_WEIGHT set (non-empty), the
// gradient stays finite and the parameter's value is made +Inf after step N's
// update instead, as an overflowing update would. Read only here; not an
// option, not in config.ini.
struct NanInjection {
  int64_t step = -1;
  std::string param;
  bool weight = false;
};

NanInjection nan_injection_from_env(const Module& model) {
  NanInjection out;
  const char* step = std::getenv("ATTNLAB_DEBUG_NAN_AT_STEP");
  if (!step || !*step) return out;
  out.step = std::strtoll(step, nullptr, 10);
  const char* param = std::getenv("ATTNLAB_DEBUG_NAN_PARAM");
  out.param = param && *param ? param : model.named_parameters().back().first;
  const char* weight = std::getenv("ATTNLAB_DEBUG_NAN_WEIGHT");
  out.weight = weight && *weight;
  return out;
}

void inject_nan(const Module& model, const std::string& param) {
  for (auto& [name, v] : model.named_parameters())
    if (name == param && v.has_grad() && v.grad().numel() > 0) {
      v.grad()[v.grad().numel() / 2] = std::numeric_limits<Real>::quiet_NaN();  // Var is a handle: the model's gradient
    }
}

void inject_inf_weight(const Module& model, const std::string& param) {
  for (auto& [name, v] : model.named_parameters())
    if (name == param && v.numel() > 0) v.value()[v.numel() / 2] = std::numeric_limits<Real>::infinity();
}

// The first parameter whose gradient holds a NaN or Inf, for the message.
std::string first_nonfinite_grad(const Module& model) {
  for (const auto& [name, v] : model.named_parameters()) {
    if (!v.has_grad()) continue;
    for (int64_t i = 0; i < v.grad().numel(); ++i)
      if (!std::isfinite(v.grad()[i])) return name;
  }
  return "(none: the loss itself)";
}

// The first parameter whose value holds a NaN or Inf; empty when all are finite.
std::string first_nonfinite_parameter(const Module& model) {
  for (const auto& [name, v] : model.named_parameters())
    if (!v.value().flat().allFinite()) return name;
  return "";
}

// Names of the residual-stream points the models append (see SequenceModel::observe_residual_stream).
std::vector<std::string> residual_stream_labels(const TransformerConfig& c) {
  std::vector<std::string> out;
  for (const std::string& stack : c.arch == "seq2seq" ? std::vector<std::string>{"enc.", "dec."} : std::vector<std::string>{""}) {
    out.push_back(stack + "emb");
    for (int64_t i = 0; i < c.n_layers; ++i) out.push_back(stack + "block" + std::to_string(i));
  }
  return out;
}

}  // namespace

int train(const TrainInvocation& job) {
  const TrainSettings& s = job.settings;
  const RunDir& run = job.run;
  const InterruptGuard interrupts;  // SIGINT/SIGTERM: finish the step, checkpoint, exit 130/143
  omp_set_num_threads(s.threads);

  auto task = make_task(s.task);
  // Tasks read from files bring their own held-out split; make_heldout draws the others'.
  const std::vector<Example>* own_heldout = task->own_heldout();
  HeldOut heldout = make_heldout(*task, own_heldout ? 0 : s.heldout, derive_seed(s.seed, kHeldoutStream));
  const std::vector<Example>& held_set = own_heldout ? *own_heldout : heldout.examples();
  const std::string batch_format = task->language_model() ? "lm" : s.model.arch;
  TrainStream stream(*task, heldout, derive_seed(s.seed, kTrainStream));
  auto model = make_model(s.model, derive_seed(s.seed, kInitStream));
  auto optimizer = make_optimizer(s.optim, model->named_parameters());
  const std::vector<Var> params = model->parameters();
  const NanInjection debug_nan = nan_injection_from_env(*model);

  int64_t first_step = 1;
  double elapsed_before = 0;
  int64_t solved_at = -1;
  fs::create_directories(run.checkpoint_dir());
  CsvWriter metrics = [&] {
    const std::string vocab = task->saved_vocab();
    if (!job.resume) {
      write_file_atomic(run.config_path(), job.config_ini);
      if (!vocab.empty()) write_file_atomic(run_vocab_path(run), vocab);
      return CsvWriter(run.metrics_path(), kMetricColumns);
    }
    if (!vocab.empty() && read_file(run_vocab_path(run)) != vocab)
      throw ValueError(s.task.file + " has changed since run '" + run.path() + "' started: its vocabulary is no longer " +
                       run_vocab_path(run) + "; start a new run");
    int64_t step = run.latest_step();
    check_checkpoint_config(s.model, run.checkpoint_stem(step));  // an edited config.ini is refused, not trained on
    Metadata meta = load_checkpoint(run.checkpoint_stem(step), *model, optimizer.get());
    try {
      stream.set_state(meta.at("data_stream"));
      model->dropout_rng().set_state(meta.at("dropout_rng"));
      elapsed_before = std::stod(meta.at("elapsed_s"));
      solved_at = std::stoll(meta.at("solved_at"));
    } catch (const std::exception& e) {  // a missing key, a malformed number or generator state
      throw IoError(model_path(run.checkpoint_stem(step)) +
                    ": the training state in its metadata is missing or malformed (" + e.what() + ")");
    }
    remove_stale_temporaries(run.path());
    remove_stale_temporaries(run.checkpoint_dir());
    first_step = step + 1;
    truncate_metrics(run.metrics_path(), step);
    return CsvWriter::append(run.metrics_path(), kMetricColumns);
  }();

  // Instruments (--probe-every): observers only, so a probed run is bitwise an unprobed one.
  std::unique_ptr<TrainingProbe> probe;
  if (s.probe_every > 0)
    probe = std::make_unique<TrainingProbe>(*model, run.path(), residual_stream_labels(s.model),
                                            job.resume ? first_step - 1 : -1);

  Progress progress(first_step, s.steps, job.quiet, s.log_every);
  if (!job.quiet) {
    progress.message("task: " + task->describe());
    progress.message("model: " + s.model.arch + ", " + std::to_string(model->parameter_count()) + " parameters; run: " +
                     run.path() + (job.resume ? " (resuming at step " + std::to_string(first_step) + ")" : ""));
  }

  auto clock_start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
  };
  auto save = [&](int64_t step) {
    Metadata meta;
    meta["model_config"] = s.model.to_json().dump();
    meta["step"] = std::to_string(step);
    meta["data_stream"] = stream.state();
    meta["dropout_rng"] = model->dropout_rng().state();
    meta["elapsed_s"] = std::to_string(elapsed());
    meta["solved_at"] = std::to_string(solved_at);
    std::error_code ec;
    try {
      save_checkpoint(run.checkpoint_stem(step), *model, optimizer.get(), meta);
    } catch (const IoError& e) {  // a full disk, a file-size limit, a directory gone or read-only
      if (!fs::exists(model_path(run.checkpoint_stem(step)), ec)) fs::remove(optimizer_path(run.checkpoint_stem(step)), ec);
      auto steps = run.checkpoint_steps();
      throw RunFailure(std::string(e.what()) + "; the checkpoint of step " + std::to_string(step) + " was not written" +
                    (steps.empty() ? std::string()
                                   : "; the checkpoint of step " + std::to_string(steps.back()) +
                                         " is intact (continue with: attnlab train --resume " + run.path() +
                                         " --steps " + std::to_string(s.steps) + ")"));
    }
    auto steps = run.checkpoint_steps();
    for (size_t i = 0; i + static_cast<size_t>(s.keep) < steps.size(); ++i) {
      fs::remove(model_path(run.checkpoint_stem(steps[i])), ec);
      fs::remove(optimizer_path(run.checkpoint_stem(steps[i])), ec);
    }
  };
  // Stops on a NaN or Inf: nothing more is written; the last checkpoint stays the run's state.
  auto stop_nonfinite = [&](const std::string& what, const std::string& why) {
    progress.finish();
    std::cerr << "attnlab train: " << what << "; stopped (" << why << "). ";
    auto steps = run.checkpoint_steps();
    if (steps.empty()) std::cerr << "No checkpoint had been written yet.\n";
    else std::cerr << "The last checkpoint (step " << steps.back() << ") is kept.\n";
    return kExitFailure;
  };
  // An update can overflow a weight to Inf (or make it NaN) although the loss
  // and gradients were finite. Such weights must never reach a checkpoint, and
  // the run stops as for a NaN loss. Whether all weights are finite costs a
  // pass over every parameter, so it is asked only where it matters: before
  // every checkpoint is written and at every log row (so a run stops within
  // --log-every steps), not every step. (A NaN weight that any later forward
  // reads makes that step's loss non-finite, which the per-step check sees.)
  // --on-nan skip cannot skip an update that is already applied, so both
  // policies stop here. Returns the exit code, or -1 when all weights are finite.
  auto check_weights = [&](int64_t step) {
    const std::string name = first_nonfinite_parameter(*model);
    if (name.empty()) return -1;
    return stop_nonfinite("non-finite parameter value after step " + std::to_string(step) +
                              " (first parameter affected: " + name + ")",
                          s.on_nan == "skip" ? "--on-nan skip cannot skip an update already applied" : "--on-nan stop");
  };

  // After an interrupt: the step is done; checkpoint it (unless just saved) and say how to go on.
  auto stop_interrupted = [&](int64_t step, bool saved) {
    if (!saved) {
      if (int code = check_weights(step); code >= 0) return code;
      save(step);
    }
    progress.finish();
    const int signal = interrupt_signal();
    std::cerr << "attnlab train: interrupted by " << signal_name(signal) << " after step " << step
              << "; checkpoint written. Resume with: attnlab train --resume " << run.path() << " --steps " << s.steps
              << "\n";
    return interrupt_exit_code(signal);
  };

  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  ce.label_smoothing = static_cast<Real>(s.label_smoothing);

  // Train metrics are averaged over each logging interval. tokens_per_s is
  // training throughput: the time spent evaluating and writing checkpoints
  // inside the interval (interval_excluded_s) is not counted.
  double sum_loss = 0, sum_tok = 0, sum_exact = 0, sum_norm = 0;
  int64_t interval_steps = 0, interval_tokens = 0;
  auto interval_start = std::chrono::steady_clock::now();
  double interval_excluded_s = 0;
  auto excluded = [&](auto&& work) {  // runs work(), its time left out of tokens_per_s
    const auto start = std::chrono::steady_clock::now();
    work();
    interval_excluded_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double tokens_per_s = 0;
  Accuracy held{0, 0, 0};
  LmScore lm;  // language models: the held-out loss (held.token is its next-token accuracy)
  bool held_valid = false;
  // False when an interrupt abandoned it (it is polled between batches, so Ctrl-C does not wait for it).
  auto evaluate_heldout = [&] {
    const StopCheck interrupted = [] { return interrupt_signal() != 0; };
    try {
      if (task->language_model()) {
        lm = lm_score(*model, held_set, 64, interrupted);
        held = Accuracy{lm.token, 0, static_cast<int64_t>(held_set.size())};
      } else {
        held = greedy_accuracy(*model, held_set, 256, nullptr, interrupted);
      }
    } catch (const EvaluationAbandoned&) {
      return false;
    }
    return true;
  };
  int64_t last_step = first_step - 1;
  ProgressStats stats;

  for (int64_t step = first_step; step <= s.steps; ++step) {
    std::vector<Example> examples = stream.next_batch(s.batch_size);
    FormattedBatch batch = format_batch(batch_format, to_pairs(examples));
    model->zero_grad();
    const bool probing = probe && (step == 1 || step % s.probe_every == 0);
    if (probing) {
      probe->before_forward();
      model->observe_residual_stream(probe->stream_sink());
    }
    Var logits = model->forward(batch.input);
    Var loss = cross_entropy(logits, batch.targets, ce);
    if (probing) {
      model->observe_residual_stream(nullptr);
      probe->after_forward(loss);
    }
    backward(loss);
    if (probing) probe->after_backward();
    if (step == debug_nan.step && !debug_nan.weight) inject_nan(*model, debug_nan.param);
    double norm = s.clip > 0 ? clip_grad_norm(params, s.clip) : grad_norm(params);
    double loss_value = step == debug_nan.step && !debug_nan.weight && debug_nan.param == "loss" ? std::nan("") : loss.item();
    if (!std::isfinite(loss_value) || !std::isfinite(norm)) {
      std::string where = first_nonfinite_grad(*model);
      std::string what = "non-finite " + std::string(std::isfinite(loss_value) ? "gradient" : "loss") + " at step " +
                         std::to_string(step) + " (loss " + std::to_string(loss_value) + ", first parameter affected: " +
                         where + ")";
      if (s.on_nan == "skip") {
        progress.finish();  // a warning, printed even with --quiet: a skipped step is lost data
        std::cerr << "attnlab train: warning: " << what << "; step skipped (--on-nan skip)\n";
        if (probe) probe->abandon();
        model->zero_grad();
        last_step = step;
        const bool save_now = step % s.eval_every == 0 || step == s.steps;  // the state after the skipped step
        if (save_now || step % s.log_every == 0)
          if (int code = check_weights(step); code >= 0) return code;
        if (save_now) excluded([&] { save(step); });
        if (interrupt_signal()) return stop_interrupted(step, save_now);
        continue;
      }
      return stop_nonfinite(what, "--on-nan stop");
    }
    optimizer->set_lr(scheduled_lr(s.schedule, s.optim.lr, step));
    optimizer->step();
    if (step == debug_nan.step && debug_nan.weight) inject_inf_weight(*model, debug_nan.param);
    if (probing) probe->after_step(step);
    last_step = step;

    Accuracy acc = teacher_forced_accuracy(logits.value(), batch.targets);
    sum_loss += loss_value;
    sum_tok += acc.token;
    sum_exact += acc.exact;
    sum_norm += norm;
    ++interval_steps;
    interval_tokens += batch.targets.numel() + batch.input.src.numel() * (s.model.arch == "seq2seq");

    bool eval_now = step % s.eval_every == 0 || step == s.steps;
    const bool log_now = step % s.log_every == 0 || eval_now;
    if (log_now)
      if (int code = check_weights(step); code >= 0) return code;
    if (eval_now) {
      bool evaluated = false;
      excluded([&] { evaluated = evaluate_heldout(); });
      if (!evaluated) return stop_interrupted(step, false);  // no metrics row: the evaluation is not done
      held_valid = true;
      if (s.target > 0 && held.exact >= s.target && solved_at < 0) solved_at = step;
    }
    if (log_now) {
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - interval_start).count() - interval_excluded_s;
      tokens_per_s = seconds > 0 ? static_cast<double>(interval_tokens) / seconds : 0;
      double n = static_cast<double>(interval_steps);
      std::vector<std::string> row = {std::to_string(step), CsvWriter::format_number(sum_loss / n),
                                      CsvWriter::format_number(optimizer->lr()), CsvWriter::format_number(sum_norm / n),
                                      CsvWriter::format_number(sum_tok / n), CsvWriter::format_number(sum_exact / n),
                                      eval_now ? CsvWriter::format_number(held.token) : "",
                                      eval_now ? CsvWriter::format_number(held.exact) : "",
                                      CsvWriter::format_number(std::round(tokens_per_s)), fixed(elapsed(), 3),
                                      eval_now && task->language_model() ? CsvWriter::format_number(lm.loss) : ""};
      metrics.row(row);
      stats.loss = sum_loss / n;
      stats.token_acc = sum_tok / n;
      stats.exact_acc = sum_exact / n;
      stats.tokens_per_s = tokens_per_s;
      sum_loss = sum_tok = sum_exact = sum_norm = 0;
      interval_steps = interval_tokens = 0;
      interval_start = std::chrono::steady_clock::now();
      interval_excluded_s = 0;
    } else if (interval_steps == 1) {
      stats.loss = loss_value;
      stats.token_acc = acc.token;
      stats.exact_acc = acc.exact;
    }
    stats.step = step;
    stats.heldout_exact = held_valid && !task->language_model() ? held.exact : -1;  // a language model has no exact match
    progress.update(stats);
    if (eval_now) excluded([&] { save(step); });
    if (eval_now && solved_at == step) break;
    if (interrupt_signal()) return stop_interrupted(step, eval_now);
  }
  progress.finish();

  if (!held_valid && !evaluate_heldout()) {  // every step is done and checkpointed already
    std::cerr << "attnlab train: interrupted by " << signal_name(interrupt_signal()) << " during the final evaluation\n";
    return interrupt_exit_code(interrupt_signal());
  }
  nlohmann::json summary = {
      {"task", s.task.name},
      {"model", s.model.arch},
      {"parameters", model->parameter_count()},
      {"steps", last_step},
      {"heldout_examples", held_set.size()},
      {"heldout_token_acc", held.token},
      {"heldout_exact", held.exact},
      {"target", s.target},
      {"solved_at_step", solved_at},
      {"seconds", elapsed()},
      {"threads", s.threads},
  };
  if (task->language_model()) {
    summary["heldout_loss"] = lm.loss;
    summary["heldout_bits_per_char"] = lm.bits_per_token;
    summary["heldout_chars"] = lm.tokens;
  }
  write_file_atomic(run.summary_path(), summary.dump(2) + "\n");
  if (!job.quiet && task->language_model()) {
    std::cout << "held-out loss " << fixed(lm.loss, 4) << " nats = " << fixed(lm.bits_per_token, 3)
              << " bits per character, next-character accuracy " << fixed(100 * lm.token, 1) << "% on " << lm.tokens
              << " characters after " << last_step << " steps (" << fixed(elapsed(), 1) << " s)\nrun directory: " << run.path()
              << "\n";
  } else if (!job.quiet) {
    std::cout << "held-out exact match " << fixed(100 * held.exact, 1) << "%, token accuracy " << fixed(100 * held.token, 1)
              << "% on " << held_set.size() << " examples after " << last_step << " steps (" << fixed(elapsed(), 1)
              << " s)";
    if (solved_at > 0) std::cout << "; target " << fixed(100 * s.target, 1) << "% reached at step " << solved_at;
    std::cout << "\nrun directory: " << run.path() << "\n";
  }
  return kExitOk;
}

}  // namespace attnlab::cli
