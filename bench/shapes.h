#pragma once
// The sizes the benchmarks run at: S, M and L of docs/benchmark.md, and graph.
#include <cstdint>
#include <string>

#include "models/config.h"

namespace attnlab::bench {

struct Shape {
  const char* name;
  int64_t V, T, d, h, L, d_ff, B;  // vocabulary, sequence, width, heads, layers, feed-forward width, batch
  // Timed training steps unless --steps says: half a second or more even at two
  // threads, so that a process starting beside the run (a reader of its output on
  // the other core) slows a few of them, not the median.
  int64_t steps;
};

// S, M, L (docs/benchmark.md), or graph: not part of the workload, the same
// 6-layer model at width 4 on two tokens, so small that its step time is the
// engine's fixed cost per step (building and walking the graph, launching each
// op, AdamW's loop over the parameter list). nullptr for any other name.
inline const Shape* find_shape(const std::string& name) {
  static constexpr Shape kShapes[] = {
      {"S", 16, 16, 64, 4, 2, 256, 64, 200},
      {"M", 32, 32, 128, 8, 4, 512, 64, 20},
      {"L", 64, 64, 256, 8, 6, 1024, 32, 5},
      {"graph", 8, 2, 4, 1, 6, 4, 1, 2000},
  };
  for (const Shape& s : kShapes)
    if (name == s.name) return &s;
  return nullptr;
}

// The encoder tagger of the workload at `shape` (training and ablation benchmarks).
inline TransformerConfig encoder_config(const Shape& shape) {
  TransformerConfig config;
  config.arch = Arch::encoder;
  config.vocab_size = shape.V;
  config.max_len = shape.T;
  config.d_model = shape.d;
  config.n_heads = shape.h;
  config.n_layers = shape.L;
  config.d_ff = shape.d_ff;
  return config;
}

// Forward FLOPs per token of the encoder tagger, counting a multiply-add as
// two: L (8 d² + 4 d d_ff + 4 T d) + 2 d V (docs/benchmark.md derives it).
inline double forward_flops_per_token(const Shape& s) {
  const double d = static_cast<double>(s.d), d_ff = static_cast<double>(s.d_ff), T = static_cast<double>(s.T);
  return static_cast<double>(s.L) * (8 * d * d + 4 * d * d_ff + 4.0 * T * d) + 2 * d * static_cast<double>(s.V);
}

}  // namespace attnlab::bench
