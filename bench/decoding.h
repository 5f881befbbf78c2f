#pragma once
// The decoding benchmark (attnlab bench --decode): greedy decoding throughput,
// KV-cached against the uncached reference that reruns the whole prefix for
// every token.
#include <cstdint>
#include <string>

#include "bench/shapes.h"
#include "models/config.h"

namespace attnlab::bench {

struct DecodeOptions {
  Shape shape{};                 // V, T, d, h, L and d_ff of the model
  Arch arch = Arch::decoder;     // decoder | seq2seq
  int64_t batch = 0;             // sequences per greedy call
  int64_t reps = 3;              // timed calls per path (the median is reported)
  int threads = 1;
  uint64_t seed = 0;
  bool reference = true;         // also time the uncached path and compare the answers
};

// Prints one JSON line; false when the uncached reference answered otherwise.
bool run_decoding(const DecodeOptions& options);

}  // namespace attnlab::bench
