#pragma once
// One training step: the batch from the stream cut into micro-batches (of
// --grad-accum, the threads and the processes; one when none splits it), each
// one's forward, loss and backward, their gradients summed in one fixed order
// (training/distributed/ordered_sum.h; sharded: each process's slice), the
// gradient hook, the norm and clipping, the update at the scheduled rate.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/probe/training_probe.h"
#include "training/evaluate.h"
#include "training/train_state.h"

namespace attnlab {

struct StepResult {
  int64_t step = 0;        // the step this was (state.step after it)
  double loss = 0;         // the batch's training loss, before the update
  double grad_norm = 0;    // the global gradient norm, before clipping
  double lr = 0;           // the learning rate of the update (0 when none was made)
  Accuracy accuracy;       // teacher-forced, on this batch
  int64_t tokens = 0;      // tokens trained on: targets, and a seq2seq model's source tokens
  bool finite = true;      // false: the loss or a gradient was NaN or Inf and no update was made
  std::string nonfinite_param;  // then: the first parameter with a non-finite gradient, or "(none: the loss itself)"
  // --noise-scale: each micro-batch's |g_k|², g_k the gradient of its own mean
  // loss, in micro-batch order over every process (training/noise_scale.h); empty: off
  std::vector<double> micro_grad_sq;
};

// Where a caller steps into a step: tests inject faults in both. The
// gradients of micro-batches and processes are already combined when
// after_backward runs (train_step sums them in micro-batch order). Empty
// hooks do nothing.
struct StepHooks {
  std::function<void(TrainState& state, double& loss)> after_backward;  // before clipping and the finiteness check
  std::function<void(TrainState& state)> after_update;                   // after the optimizer's update
};

// Advances `state` by one step (state.step + 1). With a probe, records the
// gradient-flow and attention instruments of this step. A non-finite loss or
// gradient makes no update (and abandons the probe's step, clears the
// gradients): the caller's NaN policy decides what follows.
StepResult train_step(TrainState& state, const StepHooks& hooks = {}, TrainingProbe* probe = nullptr);

// The first parameter whose gradient holds a NaN or Inf, or "(none: the loss itself)".
std::string first_nonfinite_gradient(const Module& model);
// The first parameter whose value holds a NaN or Inf; empty when all are finite.
std::string first_nonfinite_parameter(const Module& model);

}  // namespace attnlab
