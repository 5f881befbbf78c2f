#pragma once
// The replay of recorded matrix products (framework/ops/gemm_log.h records
// them): the training benchmark times one step's products alone, which is how
// long the step would take if everything that is not a matrix product (norms,
// softmax, the optimizer, the graph) cost nothing. That bounds the step's speed
// with this backend on this CPU, and says how much of a step the products are.
// A run of calls made inside one OpenMP parallel region (the attention core's
// per-head products) is replayed in parallel, as it was made.
#include <ostream>
#include <vector>

#include "framework/ops/gemm_log.h"

namespace attnlab::bench {

// Runs `calls` in order `repeats` times on scratch operands of their sizes (A
// and B shared by all calls, C one buffer per thread, all finite) and returns
// the quickest run's seconds. The calls' own data pointers are never touched.
double replay_seconds(const std::vector<GemmCall>& calls, int repeats);

// A Markdown table with one row per distinct product shape (m x n x k,
// transposes, accumulate, batch count), in order of first appearance, each
// shape's calls replayed together (best of five): calls, ms, share, GFLOP/s.
void print_products_table(const std::vector<GemmCall>& calls, std::ostream& out);

}  // namespace attnlab::bench
