#pragma once
// What the probes that run their own forward passes (training/sharpness_probe.h,
// training/induction_probe.h) hold around them: the model in eval mode (no
// dropout, so its generator is not drawn from; evaluation's positions) and
// fp32 products whatever --precision says; both restored after.
#include "framework/nn/module.h"
#include "framework/ops/gemm.h"

namespace attnlab {

class ProbeMode {
 public:
  explicit ProbeMode(Module& model) : model_(model), was_training_(model.training()) { model.eval(); }
  ~ProbeMode() { model_.train(was_training_); }
  ProbeMode(const ProbeMode&) = delete;
  ProbeMode& operator=(const ProbeMode&) = delete;

 private:
  Module& model_;
  bool was_training_;
  GemmPrecisionScope fp32_{Precision::fp32};
};

}  // namespace attnlab
