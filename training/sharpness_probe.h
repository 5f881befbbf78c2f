#pragma once
// The sharpness probe of a training run (--probe-sharpness N): after the
// update of step 1 and of every N-th step, λ_max of the training loss's
// Hessian (and with Adam/AdamW of P⁻¹H) at the new weights, into
// probe_sharpness.csv (framework/probe/sharpness.h). The loss is the
// training loss (cross-entropy with the run's label smoothing) on a fixed
// probe batch: step 1's batch, drawn again from a fresh training stream, so
// that a resumed run probes the same one (with full-batch training, the whole
// training set). Dropout is off (the model in eval mode) and the products run
// in fp32 whatever --precision says; the weights, gradients and random
// streams of training are left as they were.
#include <cstdint>
#include <memory>
#include <string>

#include "framework/probe/sharpness.h"
#include "training/train_state.h"

namespace attnlab {

class TrainingSharpness {
 public:
  // Draws the probe batch and builds one Hessian-vector product on it:
  // ValueError naming an op without second derivatives, before the CSV is
  // written. resume_step >= 0: appends to the run's CSV after that step.
  TrainingSharpness(TrainState& state, const std::string& dir, int64_t resume_step);

  bool due(int64_t step) const { return step == 1 || step % every_ == 0; }
  // The rows of `step` (just updated at learning rate lr). IoError when the CSV cannot be written.
  void record(int64_t step, double lr);

 private:
  Var probe_loss() const;  // one element: the training loss on the probe batch

  TrainState& state_;
  int64_t every_;
  FormattedBatch batch_;
  std::unique_ptr<SharpnessProbe> probe_;
};

}  // namespace attnlab
