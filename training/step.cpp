#include "training/step.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "datasets/splits.h"
#include "framework/error.h"
#include "framework/ops/loss.h"
#include "framework/optim/optim.h"
#include "models/batch.h"
#include "training/distributed/ordered_sum.h"
#include "training/distributed/shards.h"
#include "training/noise_scale.h"
#include "training/thread_slices.h"

namespace attnlab {

namespace {

// The step's batch cut into M = K x processes micro-batches of batch_size / M
// sequences, K = grad_accum x slices. Every process draws the whole batch
// from the one stream and formats every micro-batch (their targets weigh
// the losses); process r computes micro-batches r·K .. r·K + K - 1, `slices`
// at a time, one per thread.
struct MicroBatches {
  std::vector<FormattedBatch> batches;  // all M, in order
  int64_t per_process = 1;              // K
  int64_t slices = 1;                   // run at once, one per thread (1: on the model, every op threaded)
  int64_t first = 0;                    // this process's first: rank x K
  int64_t targets = 0;                  // the batch's counted targets
  int64_t stride = 0;                   // figures per micro-batch: kMicroStats, + kGradSquared with --noise-scale
  int64_t size() const { return static_cast<int64_t>(batches.size()); }
};

// What each micro-batch reports beside its gradient, gathered from every process.
enum MicroStat { kLossPart, kTokenAccuracy, kTargets, kExactAccuracy, kTrainedTokens, kMicroStats };
constexpr int64_t kGradSquared = kMicroStats;  // with --noise-scale: the squared norm of its weighed gradient

struct Forward {
  Var logits;  // (B, T, V)
  Var loss;    // scalar
};

// The batch's logits and loss, recording the instruments' forward half when probed.
Forward forward_loss(const TrainState& state, SequenceModel& model, const FormattedBatch& batch, TrainingProbe* probe) {
  if (probe) probe->before_forward();
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  ce.label_smoothing = static_cast<Real>(state.settings().label_smoothing);
  Var logits = model.forward(batch.input);
  Var loss = cross_entropy(logits, batch.targets, ce);
  if (probe) probe->after_forward(loss);
  return {logits, loss};
}

int64_t counted_targets(const IntTensor& targets) {
  int64_t n = 0;
  for (int32_t y : targets.data) n += y != kIgnoreTarget;
  return n;
}

// The threads' share of a step: with T threads, each of a process's
// grad_accum micro-batches is cut into T, run whole one per thread
// (training/thread_slices.h), when the batch splits evenly so and no probe
// records the step (the probes observe one model); else 1, and each op is
// split among the threads.
int64_t thread_slice_count(const TrainState& state, bool probed) {
  const TrainSettings& s = state.settings();
  const int64_t T = s.threads, parts = s.grad_accum * T * state.communicator().size();
  return T > 1 && !probed && s.batch_size % parts == 0 ? T : 1;
}

// The step's batch (the stream's or the --train-size set's), cut into its micro-batches.
MicroBatches micro_batches(TrainState& state, bool probed) {
  const TrainSettings& s = state.settings();
  const std::vector<Example> examples = state.next_batch();
  MicroBatches micro;
  micro.slices = thread_slice_count(state, probed);
  micro.per_process = s.grad_accum * micro.slices;
  micro.first = state.communicator().rank() * micro.per_process;
  micro.stride = kMicroStats + s.noise_scale;
  const int64_t M = micro.per_process * state.communicator().size(), B = s.batch_size / M;
  if (M > 1 && probed) throw ValueError("the probes record one micro-batch per step: not with --grad-accum > 1 or several processes");
  for (int64_t k = 0; k < M; ++k) {
    const std::vector<Example> part(examples.begin() + k * B, examples.begin() + (k + 1) * B);
    micro.batches.push_back(format_batch(state.batch_format(), to_pairs(part)));
    micro.targets += counted_targets(micro.batches.back().targets);
  }
  return micro;
}

// Dropout of a step: one micro-batch draws from the model's stream as the
// step finds it; several draw each from a stream of its own, seeded from one
// draw of the model's (k's: derive_seed(that draw, k)), and the model's
// stream goes on from after that draw.
class DropoutStreams {
 public:
  DropoutStreams(SequenceModel& model, int64_t micro_batches) : model_(model) {
    if (micro_batches == 1) return;
    seed_ = model.dropout_rng().next_u64();
    after_ = model.dropout_rng();
  }
  ~DropoutStreams() {
    if (after_) model_.dropout_rng() = *after_;
  }
  void start(SequenceModel& on, int64_t k) const {
    if (after_) on.dropout_rng() = Rng(derive_seed(seed_, static_cast<uint64_t>(k)));
  }

 private:
  SequenceModel& model_;
  uint64_t seed_ = 0;
  std::optional<Rng> after_;  // none: one micro-batch, on the model's own stream
};

// Micro-batch k on `on` (the model or a thread's replica): its loss weighed
// by its share of the batch's targets (so the M weighed losses add up to the
// batch's mean loss), its gradient computed from zero and left in on's
// parameters, its kMicroStats figures into `out`. The probe records it when
// the step is this one micro-batch.
void run_micro_batch(const TrainState& state, const MicroBatches& micro, SequenceModel& on, int64_t k,
                     TrainingProbe* probe, double* out) {
  const FormattedBatch& batch = micro.batches[static_cast<size_t>(k)];
  const int64_t n = counted_targets(batch.targets);
  const double weight = micro.targets > 0 ? static_cast<double>(n) / static_cast<double>(micro.targets) : 0;
  on.zero_grad();
  const Forward f = forward_loss(state, on, batch, probe);
  backward(f.loss, static_cast<Real>(weight));
  if (probe) probe->after_backward();
  const Accuracy acc = teacher_forced_accuracy(f.logits.value(), batch.targets);
  const int64_t trained = batch.targets.numel() + batch.input.src.numel() * (state.settings().model.arch == Arch::seq2seq);
  const double mine[kMicroStats] = {weight * static_cast<double>(f.loss.item()), acc.token, static_cast<double>(n),
                                    acc.exact, static_cast<double>(trained)};
  std::copy(mine, mine + kMicroStats, out);
}

using MicroRun = std::function<void(SequenceModel& on, int64_t k)>;

// The micro-batches' gradients summed over ordered_sum.h's tree, through
// copies: each leaf copied out of the parameters, the largest subtrees that
// this process holds summed locally, the tree finished across the processes
// (by --reduction's way) and the sum set as the parameters' gradients; with a
// sharded optimizer only this process's slice of them holds it.
void sum_copied_leaves(TrainState& state, const MicroBatches& micro, ThreadSlices& workers, const MicroRun& run) {
  const auto gradient = [&](SequenceModel& on, int64_t k) {
    run(on, k);
    std::vector<Real> g;
    append_gradients(on.parameters(), g);
    return g;
  };
  const int64_t K = micro.per_process, end = micro.first + K;
  const std::vector<Real> partials =
      local_partial_sums(micro.size(), micro.first, end, workers.ordered_leaves(micro.first, end, gradient));
  const bool slice_only = state.optimizer().sharded();
  set_gradients(state.parameters(), ordered_sum(state.communicator(), partials, K, state.shard_bounds(),
                                                state.settings().reduction, slice_only));
}

// Every micro-batch's gradient, summed over ordered_sum.h's fixed tree, which
// depends on M alone (so N processes of K micro-batches, or T threads of
// them, give the bits of one process of N·K), into the parameters'
// gradients; returns every micro-batch's figures, from every process. The
// workers are the threads, `slices` at a time, or the calling thread. One
// process whose micro-batches are one per worker sums them where they lie
// (one micro-batch: its gradient is the sum); otherwise they are summed
// through copies, across the processes.
std::vector<double> summed_gradients(TrainState& state, const MicroBatches& micro, TrainingProbe* probe) {
  const int64_t K = micro.per_process;
  std::vector<double> figures(static_cast<size_t>(K * micro.stride));
  const DropoutStreams dropout(state.model(), micro.size());
  const MicroRun run = [&](SequenceModel& on, int64_t k) {
    dropout.start(on, k);
    double* mine = figures.data() + (k - micro.first) * micro.stride;
    run_micro_batch(state, micro, on, k, probe, mine);
    if (micro.stride > kMicroStats) mine[kGradSquared] = squared_gradient_norm(on.parameters());
  };
  ThreadSlices serial(state.model(), 1);
  ThreadSlices& workers = micro.slices > 1 ? state.thread_slices() : serial;
  if (state.communicator().size() == 1 && K == micro.slices) workers.sum_in_place(K, run);
  else sum_copied_leaves(state, micro, workers, run);
  return state.communicator().allgather(figures);
}

// The step's loss, accuracy and tokens from every micro-batch's kMicroStats
// figures (`all`, in micro-batch order), added in that order. One
// micro-batch's accuracy is its own (a fraction multiplied out and divided
// again need not keep its bits).
void add_micro_stats(const std::vector<double>& all, const MicroBatches& micro, int64_t batch_size, StepResult& r) {
  const int64_t M = micro.size();
  const double B = static_cast<double>(batch_size / M);
  double loss = 0, right = 0, exact = 0, trained = 0;
  for (int64_t k = 0; k < M; ++k) {
    const double* m = all.data() + k * micro.stride;
    loss += m[kLossPart];
    right += m[kTokenAccuracy] * m[kTargets];
    exact += m[kExactAccuracy] * B;
    trained += m[kTrainedTokens];
  }
  r.loss = loss;
  const double targets = static_cast<double>(micro.targets);
  r.accuracy.token = M == 1 ? all[kTokenAccuracy] : targets > 0 ? right / targets : 0;
  r.accuracy.exact = M == 1 ? all[kExactAccuracy] : exact / static_cast<double>(batch_size);
  r.accuracy.sequences = batch_size;
  r.tokens = static_cast<int64_t>(trained);
}

// With --noise-scale, each micro-batch's |g_k|² in the normalisation of its
// own mean loss: its weighed gradient's squared norm over its weight squared
// (a micro-batch without counted targets has no mean loss: left out).
void add_micro_squared_norms(const std::vector<double>& all, const MicroBatches& micro, StepResult& r) {
  for (int64_t k = 0; k < micro.size(); ++k) {
    const double* m = all.data() + k * micro.stride;
    const double weight = m[kTargets] / static_cast<double>(micro.targets);
    if (m[kTargets] > 0) r.micro_grad_sq.push_back(m[kGradSquared] / (weight * weight));
  }
}

// The step's batch (the stream's or the --train-size set's), cut into micro-batches whose gradients
// are summed into the parameters' and whose figures into r (the batches are
// freed before the update).
void micro_batch_gradients(TrainState& state, TrainingProbe* probe, StepResult& r) {
  const MicroBatches micro = micro_batches(state, probe != nullptr);
  ++state.steps_run;
  const std::vector<double> all = summed_gradients(state, micro, probe);
  add_micro_stats(all, micro, state.settings().batch_size, r);
  if (micro.stride > kMicroStats) add_micro_squared_norms(all, micro, r);
}

// The global gradient norm; sharded, each process's gradients hold the sum in its own slice only.
double gradient_norm(const TrainState& state) {
  if (!state.optimizer().sharded()) return grad_norm(state.parameters());
  return sharded_grad_norm(state.communicator(), state.parameters(), state.shard_bounds());
}

// A non-finite loss or gradient makes no update: the first parameter with a
// non-finite gradient named (sharded: after every slice is gathered), the
// probe's step abandoned, the gradients cleared.
StepResult abandoned(TrainState& state, TrainingProbe* probe, StepResult r) {
  r.finite = false;
  if (state.optimizer().sharded()) allgather_gradients(state.communicator(), state.parameters(), state.shard_bounds());
  r.nonfinite_param = first_nonfinite_gradient(state.model());
  if (probe) probe->abandon();
  state.model().zero_grad();
  return r;
}

// The update at the step's scheduled learning rate (returned); sharded, each
// process updates its slice and the slices are gathered.
double update(TrainState& state, int64_t step) {
  const TrainSettings& s = state.settings();
  const double lr = scheduled_lr(s.schedule, s.optim.lr, step);
  state.optimizer().set_lr(lr);
  state.optimizer().step();
  if (state.optimizer().sharded()) allgather_values(state.communicator(), state.parameters(), state.shard_bounds());
  return lr;
}

// Adds what the collectives of one step moved to state.step_traffic on leaving.
class StepTraffic {
 public:
  explicit StepTraffic(TrainState& state) : state_(state), before_(state.communicator().traffic()) {}
  ~StepTraffic() {
    const Communicator::Traffic& after = state_.communicator().traffic();
    state_.step_traffic.bytes_sent += after.bytes_sent - before_.bytes_sent;
    state_.step_traffic.bytes_received += after.bytes_received - before_.bytes_received;
    state_.step_traffic.seconds += after.seconds - before_.seconds;
  }

 private:
  TrainState& state_;
  const Communicator::Traffic before_;
};

}  // namespace

StepResult train_step(TrainState& state, const StepHooks& hooks, TrainingProbe* probe) {
  const TrainSettings& s = state.settings();
  StepResult r;
  r.step = ++state.step;
  const StepTraffic counted(state);
  micro_batch_gradients(state, probe, r);  // each micro-batch's forward and backward, summed in order
  if (hooks.after_backward) hooks.after_backward(state, r.loss);
  r.grad_norm = gradient_norm(state);  // sharded: over the processes' slices
  if (s.clip > 0) clip_to_norm(state.parameters(), r.grad_norm, s.clip);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) return abandoned(state, probe, r);
  r.lr = update(state, r.step);  // sharded: each process its slice, then gathered
  if (hooks.after_update) hooks.after_update(state);
  if (probe) probe->after_step(r.step);
  return r;
}

std::string first_nonfinite_gradient(const Module& model) {
  for (const auto& [name, v] : model.named_parameters()) {
    if (!v.has_grad()) continue;
    for (int64_t i = 0; i < v.grad().numel(); ++i)
      if (!std::isfinite(v.grad()[i])) return name;
  }
  return "(none: the loss itself)";
}

std::string first_nonfinite_parameter(const Module& model) {
  for (const auto& [name, v] : model.named_parameters())
    if (!v.value().flat().allFinite()) return name;
  return "";
}

}  // namespace attnlab
