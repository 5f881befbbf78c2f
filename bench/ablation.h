#pragma once
// The ablation benchmark (attnlab bench --ablation): ablating every head of
// the encoder tagger of docs/benchmark.md over a set of examples against as
// many plain evaluations of the same set (score_set, no hooks): L·H + 1,
// with and without reusing the shared prefix.
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
// intact pass, each head's pass from its block on: reuse_prefix),
// ablation_recompute_s (the same, every pass a full forward), plain_s (L·H + 1
// plain evaluations) and the ratios to it. The three are measured
// interleaved, head by head (each ablation of one head, the intact pass told
// apart from the head's by the logits sink, and two plain passes, in
// rotating order), so that a slow spell of a shared machine falls on all.
void run_ablation_bench(const AblationBenchOptions& options);

}  // namespace attnlab::bench
