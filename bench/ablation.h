#pragma once
// The ablation benchmark (attnlab bench --ablation): ablating every head of
// the encoder tagger of docs/benchmark.md over a set of examples against as
// many plain evaluations of the same set (score_set, no hooks): L·H + 1.
#include <cstdint>

#include "bench/shapes.h"

namespace attnlab::bench {

struct AblationBenchOptions {
  Shape shape{};
  int64_t examples = 500;  // random examples of T tokens, reversed as the answer
  int threads = 1;
  uint64_t seed = 0;
};

// Prints one JSON line: ablation_s (every head zeroed in turn, with the
// intact pass), plain_s (L·H + 1 plain evaluations) and their ratio. The two
// are measured interleaved, head by head (the intact pass and one head
// against two plain passes, in alternating order), so that a slow spell of
// a shared machine falls on both.
void run_ablation_bench(const AblationBenchOptions& options);

}  // namespace attnlab::bench
