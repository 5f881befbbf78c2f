#include "training/step.h"

#include <algorithm>
#include <cmath>

#include "datasets/splits.h"
#include "framework/error.h"
#include "framework/ops/loss.h"
#include "framework/optim/optim.h"
#include "models/batch.h"
#include "training/distributed/ordered_sum.h"
#include "training/distributed/shards.h"
#include "training/thread_slices.h"

namespace attnlab {

namespace {

struct Forward {
  Var logits;  // (B, T, V)
  Var loss;    // scalar
};

// The batch's logits and loss, recording the instruments' forward half when probed.
Forward forward_loss(const TrainState& state, SequenceModel& model, const FormattedBatch& batch, TrainingProbe* probe) {
  if (probe) {
    probe->before_forward();
    model.observe_residual_stream(probe->stream_sink());
  }
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  ce.label_smoothing = static_cast<Real>(state.settings().label_smoothing);
  Var logits = model.forward(batch.input);
  Var loss = cross_entropy(logits, batch.targets, ce);
  if (probe) {
    model.observe_residual_stream(nullptr);
    probe->after_forward(loss);
  }
  return {logits, loss};
}

int64_t counted_targets(const IntTensor& targets) {
  int64_t n = 0;
  for (int32_t y : targets.data) n += y != kIgnoreTarget;
  return n;
}

// What each micro-batch reports beside its gradient, gathered from every process.
enum MicroStat { kLossPart, kRightTokens, kTargets, kExactSequences, kTrainedTokens, kMicroStats };

// The step's loss, accuracy and tokens from every micro-batch's kMicroStats
// figures (`all`, M of them in micro-batch order), added in that order.
void add_micro_stats(const std::vector<double>& all, int64_t M, int64_t targets, int64_t batch_size, StepResult& r) {
  double loss = 0, right = 0, exact = 0, trained = 0;
  for (int64_t k = 0; k < M; ++k) {
    const double* m = all.data() + k * kMicroStats;
    loss += m[kLossPart];
    right += m[kRightTokens];
    exact += m[kExactSequences];
    trained += m[kTrainedTokens];
  }
  r.loss = loss;
  r.accuracy.token = targets > 0 ? right / static_cast<double>(targets) : 0;
  r.accuracy.exact = exact / static_cast<double>(batch_size);
  r.accuracy.sequences = batch_size;
  r.tokens = static_cast<int64_t>(trained);
}

// The threads' share of a step: with T threads, each of a process's
// grad_accum micro-batches is cut into T, run whole one per thread
// (training/thread_slices.h), when the batch splits evenly so and no probe
// records the step (the probes observe one model); else 1, and each op is
// split among the threads.
int64_t thread_slices(const TrainState& state, bool probed) {
  const TrainSettings& s = state.settings();
  const int64_t T = s.threads, parts = s.grad_accum * T * state.communicator().size();
  return T > 1 && !probed && s.batch_size % parts == 0 ? T : 1;
}

// A step split into M = K x processes micro-batches of the global batch, K =
// grad_accum x `slices` (every process draws the whole batch from the one
// stream; process r takes micro-batches r·K .. r·K + K - 1, its threads
// `slices` at a time). Micro-batch k's loss is weighed by
// its share of the batch's targets, so the sum is the whole batch's mean loss;
// its gradient is computed from zero, and the M gradients are summed over the
// fixed tree of ordered_sum.h, which depends on M alone, so N processes of K
// micro-batches give the bits of one process of N·K. Dropout draws come from
// a stream per micro-batch, seeded from the step's one draw of the model's
// dropout stream. With a sharded optimizer and the reduce-scatter, only this
// process's slice of the gradients holds the sum.
void micro_batch_gradients(TrainState& state, const std::vector<Example>& examples, int64_t slices, StepResult& r) {
  const TrainSettings& s = state.settings();
  const Communicator& comm = state.communicator();
  const int64_t K = s.grad_accum * slices, M = K * comm.size(), B = s.batch_size / M;
  std::vector<FormattedBatch> batches;
  int64_t targets = 0;
  for (int64_t k = 0; k < M; ++k) {
    const std::vector<Example> part(examples.begin() + k * B, examples.begin() + (k + 1) * B);
    batches.push_back(format_batch(state.batch_format(), to_pairs(part)));
    targets += counted_targets(batches.back().targets);
  }
  SequenceModel& model = state.model();
  const uint64_t dropout_seed = model.dropout_rng().next_u64();
  const Rng stream = model.dropout_rng();
  const int64_t first = comm.rank() * K;
  std::vector<double> stats(static_cast<size_t>(K * kMicroStats));
  // Micro-batch k on `on`, the model or a thread's replica of it: its gradient left in on's parameters.
  const auto run = [&](SequenceModel& on, int64_t k) {
    const FormattedBatch& batch = batches[static_cast<size_t>(k)];
    const int64_t n = counted_targets(batch.targets);
    const double weight = targets > 0 ? static_cast<double>(n) / static_cast<double>(targets) : 0;
    on.dropout_rng() = Rng(derive_seed(dropout_seed, static_cast<uint64_t>(k)));
    on.zero_grad();
    const Forward f = forward_loss(state, on, batch, nullptr);
    backward(f.loss, static_cast<Real>(weight));
    const Accuracy acc = teacher_forced_accuracy(f.logits.value(), batch.targets);
    const double trained = static_cast<double>(batch.targets.numel() + batch.input.src.numel() * (s.model.arch == Arch::seq2seq));
    const double mine[kMicroStats] = {weight * static_cast<double>(f.loss.item()), acc.token * static_cast<double>(n),
                                      static_cast<double>(n), acc.exact * static_cast<double>(B), trained};
    std::copy(mine, mine + kMicroStats, stats.begin() + (k - first) * kMicroStats);
  };
  const auto gradient = [&](SequenceModel& on, int64_t k) {
    run(on, k);
    std::vector<Real> g;
    append_gradients(on.parameters(), g);
    return g;
  };
  if (slices > 1 && comm.size() == 1 && K == slices) {  // one micro-batch per thread: summed where they lie
    state.thread_slices().sum_in_place(K, run);
  } else {
    const auto leaf = slices > 1 ? state.thread_slices().ordered_leaves(first, first + K, gradient)
                                 : std::function<std::vector<Real>(int64_t)>([&](int64_t k) { return gradient(model, k); });
    const std::vector<Real> partials = local_partial_sums(M, first, first + K, leaf);
    const bool slice_only = state.optimizer().sharded();
    set_gradients(state.parameters(),
                  ordered_sum(comm, partials, K, state.shard_bounds(), parse_reduction(s.reduction), slice_only));
  }
  model.dropout_rng() = stream;
  add_micro_stats(comm.allgather(stats), M, targets, s.batch_size, r);
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
  const std::vector<Example> examples = state.stream().next_batch(s.batch_size);
  const int64_t slices = thread_slices(state, probe != nullptr);
  const bool split = s.grad_accum * slices * state.communicator().size() > 1;
  if (split && probe) throw ValueError("the probes record one micro-batch per step: not with --grad-accum > 1 or several processes");
  FormattedBatch batch;
  Var logits;
  ++state.steps_run;
  const StepTraffic counted(state);
  if (split) {
    micro_batch_gradients(state, examples, slices, r);
  } else {
    batch = format_batch(state.batch_format(), to_pairs(examples));
    state.model().zero_grad();
    const Forward f = forward_loss(state, state.model(), batch, probe);
    backward(f.loss);
    if (probe) probe->after_backward();
    r.loss = f.loss.item();
    logits = f.logits;
  }
  if (hooks.after_backward) hooks.after_backward(state, r.loss);
  // Sharded, each process's gradients hold the sum in its own slice (or everywhere, after a gather).
  const bool sharded = state.optimizer().sharded();
  const Communicator& comm = state.communicator();
  r.grad_norm = sharded ? sharded_grad_norm(comm, state.parameters(), state.shard_bounds()) : grad_norm(state.parameters());
  if (s.clip > 0) clip_to_norm(state.parameters(), r.grad_norm, s.clip);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    r.finite = false;
    if (sharded) allgather_gradients(comm, state.parameters(), state.shard_bounds());  // to name the parameter
    r.nonfinite_param = first_nonfinite_gradient(state.model());
    if (probe) probe->abandon();
    state.model().zero_grad();
    return r;
  }
  r.lr = scheduled_lr(s.schedule, s.optim.lr, r.step);
  state.optimizer().set_lr(r.lr);
  state.optimizer().step();
  if (sharded) allgather_values(comm, state.parameters(), state.shard_bounds());
  if (hooks.after_update) hooks.after_update(state);
  if (probe) probe->after_step(r.step);
  if (!split) {
    r.accuracy = teacher_forced_accuracy(logits.value(), batch.targets);
    r.tokens = batch.targets.numel() + batch.input.src.numel() * (s.model.arch == Arch::seq2seq);
  }
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
