#include "framework/nn/dropout.h"

#include <string>

#include "framework/ops/dropout.h"

namespace attnlab {

Dropout::Dropout(Real p, Rng& dropout_rng) : p_(p), rng_(&dropout_rng) {
  if (!(p >= 0 && p < 1)) throw ValueError("Dropout: p must lie in [0, 1), got " + std::to_string(p));
}

Var Dropout::forward(const Var& x) const {
  if (!training() || p_ == 0) return x;
  return dropout(x, p_, *rng_, true);
}

}  // namespace attnlab
