#pragma once
// The small training setting several tests share: reverse over 4 symbols of
// length 4 (256 distinct inputs), one block of width 16 (2 heads, d_ff 32), 20
// held-out examples; a step takes about a millisecond. Callers set the rest
// (batch, steps, seed) and finalize.
#include "training/settings.h"

namespace attnlab::testing {

inline TrainSettings tiny_reverse_settings() {
  TrainSettings s = default_settings();
  s.task.name = "reverse";
  s.task.vocab = 4;
  s.task.min_len = s.task.max_len = 4;
  s.model.d_model = 16;
  s.model.n_heads = 2;
  s.model.n_layers = 1;
  s.model.d_ff = 32;
  s.heldout = 20;
  return s;
}

}  // namespace attnlab::testing
