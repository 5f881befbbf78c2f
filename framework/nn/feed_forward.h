#pragma once
// Position-wise feed-forward block: fc2(dropout(act(fc1(x)))).
#include <memory>
#include <string>

#include "framework/nn/activation.h"
#include "framework/nn/dropout.h"
#include "framework/nn/hook_points.h"
#include "framework/nn/linear.h"

namespace attnlab {

class FeedForward : public Module {
 public:
  // Children fc1 (d -> d_ff), fc2 (d_ff -> d), with biases or (bias false)
  // none, initialised in that order from `init` (see Linear), and `dropout`
  // (no parameters) drawing from dropout_rng.
  FeedForward(int64_t d, int64_t d_ff, Activation act, Real dropout, Rng& init, Rng& dropout_rng, bool bias = true);

  // x (..., d) -> (..., d).
  Var forward(const Var& x) const;
  // Declares prefix + hidden (..., d_ff: after the activation, before dropout)
  // and prefix + out (..., d: fc2's output), which forward then passes.
  void attach_hooks(HookTable& table, const std::string& prefix);

  Activation activation() const { return act_; }

  std::shared_ptr<Linear> fc1;
  std::shared_ptr<Linear> fc2;
  std::shared_ptr<Dropout> dropout;

 private:
  Activation act_;
  HookSite hooks_;
};

}  // namespace attnlab
