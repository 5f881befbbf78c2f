#pragma once
// The training benchmark (attnlab bench; the workload is docs/benchmark.md's):
// timed training steps of the encoder tagger, one JSON line.
#include <cstdint>

#include "bench/shapes.h"

namespace attnlab::bench {

struct TrainingOptions {
  int threads = 1;
  int64_t steps = 0;   // timed steps; 0 = the shape's default, Shape::steps (S 200, M 20, L 5, graph 2000)
  int64_t warmup = 5;  // untimed steps first
  uint64_t seed = 0;   // of the weights and the data
  bool peaks = true;   // measure the FMA and matrix-product peaks, and the products-only bound
  bool products_table = false;  // after the JSON line, the step's products by shape
  // With several threads: each runs whole slices of the batch (training/thread_slices.h;
  // where the batch splits evenly among them), as train does, or false: every op is split.
  bool batch_slices = true;
};

// Times the steps and prints one JSON line (and the table when asked).
void run_training(const Shape& shape, const TrainingOptions& options);

}  // namespace attnlab::bench
