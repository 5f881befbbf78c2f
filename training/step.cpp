#include "training/step.h"

#include <cmath>

#include "framework/ops/loss.h"
#include "framework/optim/optim.h"
#include "models/batch.h"

namespace attnlab {

namespace {

struct Forward {
  Var logits;  // (B, T, V)
  Var loss;    // scalar
};

// The batch's logits and loss, recording the instruments' forward half when probed.
Forward forward_loss(TrainState& state, const FormattedBatch& batch, TrainingProbe* probe) {
  SequenceModel& model = state.model();
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

}  // namespace

StepResult train_step(TrainState& state, const StepHooks& hooks, TrainingProbe* probe) {
  const TrainSettings& s = state.settings();
  StepResult r;
  r.step = ++state.step;
  FormattedBatch batch = format_batch(state.batch_format(), to_pairs(state.stream().next_batch(s.batch_size)));
  state.model().zero_grad();
  const Forward f = forward_loss(state, batch, probe);
  backward(f.loss);
  if (probe) probe->after_backward();
  r.loss = f.loss.item();
  if (hooks.after_backward) hooks.after_backward(state, r.loss);
  r.grad_norm = s.clip > 0 ? clip_grad_norm(state.parameters(), s.clip) : grad_norm(state.parameters());
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    r.finite = false;
    r.nonfinite_param = first_nonfinite_gradient(state.model());
    if (probe) probe->abandon();
    state.model().zero_grad();
    return r;
  }
  r.lr = scheduled_lr(s.schedule, s.optim.lr, r.step);
  state.optimizer().set_lr(r.lr);
  state.optimizer().step();
  if (hooks.after_update) hooks.after_update(state);
  if (probe) probe->after_step(r.step);
  r.accuracy = teacher_forced_accuracy(f.logits.value(), batch.targets);
  r.tokens = batch.targets.numel() + batch.input.src.numel() * (s.model.arch == "seq2seq");
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
