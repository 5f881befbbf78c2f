#pragma once
// Dropout as a module: active only in training mode.
#include "framework/nn/module.h"
#include "framework/random.h"

namespace attnlab {

class Dropout : public Module {
 public:
  // Keeps a pointer to `dropout_rng` (it must outlive the module); every
  // training-mode forward draws its mask from it. p in [0, 1) (ValueError).
  Dropout(Real p, Rng& dropout_rng);

  // Inverted dropout in training mode (zero with probability p, scale the rest
  // by 1/(1−p)); the identity in eval mode or when p == 0.
  Var forward(const Var& x) const;

  Real p() const { return p_; }

 private:
  Real p_;
  Rng* rng_;
};

}  // namespace attnlab
