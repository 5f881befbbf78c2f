#include "training/trainer.h"

#include <cmath>
#include <filesystem>

#include "framework/error.h"
#include "framework/io/atomic_file.h"
#include "framework/io/test_point.h"
#include "training/distributed/shards.h"

namespace attnlab {

namespace {

// Each residual-stream hook point (SequenceModel::residual_stream_points) with its label in the
// probe's CSV: "embed" -> "emb", "blocks.N.resid_post" -> "blockN", "enc." / "dec." for "encoder." / "decoder.".
std::vector<std::pair<std::string, std::string>> labelled_stream_points(const std::vector<std::string>& points) {
  static const std::pair<std::string, std::string> kStacks[] = {{"encoder.", "enc."}, {"decoder.", "dec."}};
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& point : points) {
    std::string name = point;
    std::string label;
    for (const auto& [stack, short_name] : kStacks)
      if (name.rfind(stack, 0) == 0) {
        label = short_name;
        name = name.substr(stack.size());
      }
    if (name == "embed") label += "emb";
    else label += "block" + name.substr(7, name.find('.', 7) - 7);  // "blocks.N.resid_post"
    out.emplace_back(point, label);
  }
  return out;
}

std::string describe_nonfinite(const StepResult& r) {
  return "non-finite " + std::string(std::isfinite(r.loss) ? "gradient" : "loss") + " at step " +
         std::to_string(r.step) + " (loss " + std::to_string(r.loss) + ", first parameter affected: " +
         r.nonfinite_param + ")";
}

// The checkpoint metadata of an interrupted run's loose ends. An evaluation owed
// "with_row" was a step's scheduled one (its metrics row, the target, the
// checkpoint follow it); "final" is the one after the last step, when that
// step did not evaluate (a skipped non-finite step).
const char* const kOwedKey = "evaluation_owed";
const char* const kOwedWithRow = "with_row";
const char* const kOwedFinal = "final";
// The training figures summed since the last metrics row (MetricsLog::interval_state).
const char* const kIntervalKey = "metrics_interval";
// --noise-scale's moving averages (NoiseScaleEma::state).
const char* const kNoiseKey = "noise_scale_ema";

std::string metadata_value(const Metadata& meta, const char* key) {
  const auto it = meta.find(key);
  return it == meta.end() ? "" : it->second;
}

TrainOutcome ended(TrainEnd end, int64_t step) {
  TrainOutcome out;
  out.end = end;
  out.last_step = step;
  return out;
}

}  // namespace

Trainer::Trainer(TrainState& state, TrainerOptions options)
    : state_(state), s_(state.settings()), options_(std::move(options)) {
  if (s_.noise_scale && s_.grad_accum * state_.communicator().size() < 2)
    throw ValueError("--noise-scale needs at least 2 micro-batches a step: --grad-accum 2 or more, or mpirun -np 2 "
                     "or more, not 1");
  if (s_.noise_scale) noise_.emplace();
  const std::string& dir = options_.run_dir;
  if (dir.empty() && (options_.resume || s_.probe_every > 0 || s_.probe_sharpness > 0 || s_.probe_induction > 0 ||
                      s_.tensorboard))
    throw ValueError("resuming, --probe-every, --probe-sharpness, --probe-induction and --tensorboard need a run "
                     "directory");
  if (dir.empty()) {
    metrics_.emplace("", -1);
    return;
  }
  // Every process reads a resumed run's checkpoint; only the root process writes.
  const bool root = state_.communicator().is_root();
  if (s_.probe_every > 0 && state_.communicator().size() > 1)
    throw ValueError("--probe-every records one process's micro-batch: not with several processes");
  if (s_.probe_sharpness > 0 && state_.communicator().size() > 1)
    throw ValueError("--probe-sharpness probes one process's model: not with several processes");
  if (s_.probe_induction > 0 && state_.communicator().size() > 1)
    throw ValueError("--probe-induction probes one process's model: not with several processes");
  checkpoints_.emplace(dir + "/checkpoints");
  if (root) std::filesystem::create_directories(checkpoints_->dir());
  int64_t resumed = -1;
  if (options_.resume) {
    const std::vector<int64_t> steps = checkpoints_->steps();
    if (steps.empty()) throw IoError("run directory '" + dir + "' has no checkpoint yet");
    resumed = steps.back();
    restore(resumed);
    if (root) remove_stale_temporaries(dir);
    if (root) remove_stale_temporaries(checkpoints_->dir());
    if (root) checkpoints_->remove_after(resumed);
  } else {
    metrics_.emplace(root ? dir + "/metrics.csv" : "", resumed);
  }
  // Observers only: a probed run is bitwise an unprobed one.
  if (s_.probe_every > 0)
    probe_ = std::make_unique<TrainingProbe>(state_.model(), state_.model().hooks(), dir,
                                             labelled_stream_points(state_.model().residual_stream_points()), resumed);
  if (s_.probe_sharpness > 0) sharpness_ = std::make_unique<TrainingSharpness>(state_, dir, resumed);
  if (s_.probe_induction > 0) induction_ = std::make_unique<TrainingInduction>(state_, dir, resumed);
  fourier_ = records_fourier(state_);
  if (fourier_ && root) fourier_csv_ = std::make_unique<TrainingFourier>(state_, dir, resumed);
  // A resumed run starts a new event file (TensorBoard reads every file of
  // the directory) that begins with a session start after the checkpoint:
  // TensorBoard then drops what a killed run logged past it, as metrics.csv does.
  if (s_.tensorboard && root) {
    events_ = std::make_unique<TfEventsWriter>(dir);
    if (resumed >= 0) events_->session_start(resumed + 1);
    metrics_->set_events(events_.get());
    if (probe_) probe_->set_events(events_.get());
    if (induction_) induction_->set_events(events_.get());
    if (fourier_csv_) fourier_csv_->set_events(events_.get());
  }
}

Trainer::~Trainer() = default;

bool owes_evaluation(const std::string& stem) { return !metadata_value(read_checkpoint_metadata(stem), kOwedKey).empty(); }

// The state of checkpoint `step`, and what it owes: its evaluation, and the
// steps since the last metrics row (so that the next row averages them all).
void Trainer::restore(int64_t step) {
  elapsed_before_ = checkpoints_->restore(state_, step);
  const std::string stem = checkpoints_->stem(step);
  const Metadata meta = read_checkpoint_metadata(stem);
  owed_ = metadata_value(meta, kOwedKey);
  const bool root = state_.communicator().is_root();
  metrics_.emplace(root ? options_.run_dir + "/metrics.csv" : "", step);
  const std::string interval = metadata_value(meta, kIntervalKey);
  if (!interval.empty()) metrics_->set_interval_state(interval, model_path(stem));
  const std::string noise = metadata_value(meta, kNoiseKey);
  if (noise_ && !noise.empty()) noise_->set_state(noise, model_path(stem));
}

TrainOutcome Trainer::run() {
  clock_start_ = std::chrono::steady_clock::now();
  metrics_->start_interval();
  if (owed_ == kOwedWithRow)
    if (auto end = settle_owed_evaluation()) return *end;
  for (int64_t step = state_.step + 1; step <= s_.steps && !solved_; ++step) {
    const bool probing = probe_ && (step == 1 || step % s_.probe_every == 0);
    StepResult r;
    if (!probing) {
      r = train_step(state_, options_.hooks, nullptr);
    } else try {  // probes record one process's micro-batch: only a single process gets here
        r = train_step(state_, options_.hooks, probe_.get());
      } catch (const IoError& e) {
        throw write_failure(e.what());
      }
    if (r.finite && sharpness_ && sharpness_->due(step)) probe_sharpness(r);
    if (r.finite && induction_ && induction_->due(step)) probe_induction(step);
    if (auto end = r.finite ? after_update(r) : after_nonfinite(r)) return *end;
  }
  if (!held_valid_) {  // the last step was skipped (--on-nan skip): its checkpoint owes this evaluation
    if (!evaluate()) return ended(TrainEnd::interrupted, state_.step);
    owed_.clear();
    save_evaluated();
  }
  return finished();
}

// The sharpness probe's rows of this step, before its checkpoint; its time is not training's.
void Trainer::probe_sharpness(const StepResult& r) {
  try {
    excluded([&] { sharpness_->record(r.step, r.lr); });
  } catch (const IoError& e) {
    throw write_failure(e.what());
  }
}

// The induction probe's rows of this step, before its checkpoint; its time is not training's.
void Trainer::probe_induction(int64_t step) {
  try {
    excluded([&] { induction_->record(step); });
  } catch (const IoError& e) {
    throw write_failure(e.what());
  }
}

// The embedding's spectrum at an evaluation's step, before the evaluation (whose
// checkpoint, owing it or not, then follows the row). The root process writes;
// a failure there stops every process, as metrics.csv's does.
void Trainer::record_fourier(int64_t step) {
  if (!fourier_) return;
  std::optional<std::string> failed;
  if (fourier_csv_) try {
      fourier_csv_->record(step);
    } catch (const IoError& e) {
      failed = e.what();
    }
  const Communicator& comm = state_.communicator();
  if (comm.size() > 1 ? comm.any(failed.has_value()) : failed.has_value())
    throw write_failure(failed ? *failed : "the root process could not write embedding_fourier.csv");
}

TrainOutcome Trainer::finished() const {
  TrainOutcome out = ended(TrainEnd::finished, state_.step);
  out.heldout = held_;
  out.seconds = elapsed();
  return out;
}

// The checkpoint after an evaluation. The run's last one comes after what
// ends the run (on_finish: the CLI's summary.json), so that whenever a
// signal ends the process, a run whose last checkpoint is complete is complete.
void Trainer::save_evaluated() {
  if ((solved_ || state_.step == s_.steps) && options_.on_finish) options_.on_finish(finished());
  save();
}

std::optional<TrainOutcome> Trainer::after_update(const StepResult& r) {
  const int64_t step = r.step;
  metrics_->add(r);
  if (noise_) noise_->add(r.micro_grad_sq, r.grad_norm, s_.batch_size);
  const bool eval_now = step % s_.eval_every == 0 || step == s_.steps;
  const bool log_now = step % s_.log_every == 0 || eval_now;
  if (log_now)
    if (auto end = check_weights(step)) return end;
  if (eval_now) {
    excluded([&] { record_fourier(step); });
    bool evaluated = false;
    excluded([&] { evaluated = evaluate(); });
    if (!evaluated) return owe_evaluation(step);  // no metrics row: the evaluation is not done
    if (s_.target > 0) solved_ = state_.record_target(step, held_.accuracy.exact >= s_.target);
  }
  report(r, log_now, eval_now);
  if (eval_now) excluded([&] { save_evaluated(); });
  // After the last step only summary.json is left to write: a stop then finishes it.
  if (solved_ || step == s_.steps) return std::nullopt;
  if (stop_requested()) return interrupted(step, eval_now);
  return std::nullopt;
}

std::optional<TrainOutcome> Trainer::after_nonfinite(const StepResult& r) {
  const std::string what = describe_nonfinite(r);
  if (s_.on_nan != OnNan::skip) {
    TrainOutcome out = ended(TrainEnd::nonfinite, r.step);
    out.problem = what;
    out.policy = "--on-nan stop";
    return out;
  }
  if (options_.on_warning) options_.on_warning(what + "; step skipped (--on-nan skip)");
  const bool save_now = r.step % s_.eval_every == 0 || r.step == s_.steps;  // the state after the skipped step
  if (save_now || r.step % s_.log_every == 0)
    if (auto end = check_weights(r.step)) return end;
  if (r.step == s_.steps) owed_ = kOwedFinal;  // run()'s evaluation after the loop, which a signal may abandon
  if (save_now) excluded([&] { save(); });
  if (r.step < s_.steps && stop_requested()) return interrupted(r.step, save_now);
  return std::nullopt;
}

// An update can overflow a weight to Inf (or make it NaN) although the loss
// and gradients were finite. Such weights must never reach a checkpoint, and
// the run stops as for a NaN loss. Whether all weights are finite costs a pass
// over every parameter, so it is asked only where it matters: before every
// checkpoint and at every log row (so a run stops within log_every steps),
// not every step. (A NaN weight that a later forward reads makes that step's
// loss non-finite, which every step checks.) on_nan "skip" cannot skip an
// update already applied, so both policies stop here.
std::optional<TrainOutcome> Trainer::check_weights(int64_t step) const {
  const std::string name = first_nonfinite_parameter(state_.model());
  if (name.empty()) return std::nullopt;
  TrainOutcome out = ended(TrainEnd::nonfinite, step);
  out.problem = "non-finite parameter value after step " + std::to_string(step) + " (first parameter affected: " +
                name + ")";
  out.policy = s_.on_nan == OnNan::skip ? "--on-nan skip cannot skip an update already applied" : "--on-nan stop";
  return out;
}

std::optional<TrainOutcome> Trainer::interrupted(int64_t step, bool checkpointed) {
  if (!checkpointed) {
    if (auto end = check_weights(step)) return end;
    save();
  }
  return ended(TrainEnd::interrupted, step);
}

// A signal abandoned the evaluation of `step`: its checkpoint says so, and
// the resumed run does it first (settle_owed_evaluation).
TrainOutcome Trainer::owe_evaluation(int64_t step) {
  owed_ = kOwedWithRow;
  save();
  return ended(TrainEnd::interrupted, step);
}

// What after_update did not get to after the evaluation it was interrupted in.
std::optional<TrainOutcome> Trainer::settle_owed_evaluation() {
  const int64_t step = state_.step;
  bool evaluated = false;
  excluded([&] { evaluated = evaluate(); });
  if (!evaluated) return ended(TrainEnd::interrupted, step);  // the checkpoint still owes it
  if (s_.target > 0) solved_ = state_.record_target(step, held_.accuracy.exact >= s_.target);
  StepResult r;
  r.step = step;
  report(r, true, true);
  owed_.clear();
  excluded([&] { save_evaluated(); });
  if (!solved_ && step < s_.steps && stop_requested()) return ended(TrainEnd::interrupted, step);
  return std::nullopt;
}

// Train figures are averaged over each logging interval; between rows the
// display shows the first step of the interval.
// The root process writes metrics.csv (and the event file); a failure there
// stops every process after this step, as a checkpoint's does.
void Trainer::report(const StepResult& r, bool log_now, bool evaluated) {
  if (log_now) {
    std::optional<std::string> failed;
    try {
      stats_ = metrics_->write_row(r.step, state_.optimizer().lr(), evaluated ? &held_ : nullptr, elapsed(),
                                   noise_ ? &*noise_ : nullptr, weight_norm(state_.model()));
    } catch (const IoError& e) {
      failed = e.what();
    }
    const Communicator& comm = state_.communicator();
    if (comm.size() > 1 ? comm.any(failed.has_value()) : failed.has_value())
      throw write_failure(failed ? *failed : "the root process could not write metrics.csv");
  } else if (metrics_->interval_steps() == 1) {
    stats_.loss = r.loss;
    stats_.token_acc = r.accuracy.token;
    stats_.exact_acc = r.accuracy.exact;
  }
  stats_.step = r.step;
  stats_.heldout_exact = held_valid_ && !held_.language_model ? held_.accuracy.exact : -1;
  if (options_.on_step) options_.on_step(stats_);
}

bool Trainer::evaluate() {
  const auto stop = [this] { return stop_requested(); };
  std::optional<HeldoutScore> score =
      score_heldout(state_.model(), state_.task(), state_.heldout(), stop, state_.communicator());
  if (!score) return false;
  held_ = *score;
  held_valid_ = true;
  return true;
}

// The root process writes; a failure there stops every process.
void Trainer::save() {
  if (!checkpoints_) return;
  const Communicator& comm = state_.communicator();
  std::optional<CheckpointFailure> failed;
  // A sharded optimizer's state is gathered by every process: the checkpoint is one process's.
  const bool sharded = state_.optimizer().sharded();
  const NamedTensors gathered =
      sharded ? full_optimizer_state(comm, state_.optimizer(), state_.shard_bounds()) : NamedTensors{};
  Metadata extra = options_.checkpoint_metadata;
  extra[kOwedKey] = owed_;
  extra[kIntervalKey] = metrics_->interval_state();
  if (noise_) extra[kNoiseKey] = noise_->state();
  if (comm.is_root()) try {
      checkpoints_->save(state_, elapsed(), s_.keep, extra, sharded ? &gathered : nullptr);
    } catch (const CheckpointFailure& e) {
      failed = e;
    }
  if (comm.any(failed.has_value()))
    throw failed ? *failed : CheckpointFailure("the root process could not write the checkpoint", -1);
  if (options_.on_checkpoint) options_.on_checkpoint();
}

RunWriteFailure Trainer::write_failure(const std::string& what) const {
  const std::vector<int64_t> intact = checkpoints_ ? checkpoints_->steps() : std::vector<int64_t>{};
  if (intact.empty()) return RunWriteFailure(what + "; no checkpoint had been written yet", -1);
  return RunWriteFailure(what + "; the checkpoint of step " + std::to_string(intact.back()) + " is intact",
                         intact.back());
}

// Asked of every process and decided together: one process's interrupt stops them all.
bool Trainer::stop_requested() const {
  test_point();  // after every step and between the batches of an evaluation
  const bool local = options_.stop_requested && options_.stop_requested();
  const Communicator& comm = state_.communicator();
  return comm.size() > 1 ? comm.any(local) : local;
}

void Trainer::excluded(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  metrics_->exclude(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

double Trainer::elapsed() const {
  return elapsed_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start_).count();
}

}  // namespace attnlab
