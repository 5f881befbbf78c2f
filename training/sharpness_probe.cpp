#include "training/sharpness_probe.h"

#include "framework/ops/loss.h"
#include "training/probe_mode.h"

namespace attnlab {

namespace {

TopEigenOptions solver_options(const TrainSettings& s) {
  TopEigenOptions o;
  o.tolerance = s.sharpness_tol;
  o.max_iterations = static_cast<int>(s.sharpness_iters);
  return o;
}

}  // namespace

TrainingSharpness::TrainingSharpness(TrainState& state, const std::string& dir, int64_t resume_step)
    : state_(state),
      every_(state.settings().probe_sharpness),
      batch_(format_batch(state.batch_format(), to_pairs(state.first_batch()))) {
  const TrainSettings& s = state.settings();
  {
    const ProbeMode mode(state.model());
    HessianVectorProduct check([this] { return probe_loss(); }, state.parameters());
  }
  probe_ = std::make_unique<SharpnessProbe>(dir, state.optimizer(), s.optim, solver_options(s),
                                            derive_seed(s.seed, kSharpnessStream), resume_step);
}

Var TrainingSharpness::probe_loss() const {
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  ce.label_smoothing = static_cast<Real>(state_.settings().label_smoothing);
  return cross_entropy(state_.model().forward(batch_.input), batch_.targets, ce);
}

void TrainingSharpness::record(int64_t step, double lr) {
  const ProbeMode mode(state_.model());
  probe_->record(step, [this] { return probe_loss(); }, lr);
}

}  // namespace attnlab
