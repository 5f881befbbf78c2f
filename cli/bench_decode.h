#pragma once
// attnlab bench --decode: greedy decoding throughput, KV-cached against the
// uncached reference that reruns the whole prefix for every token.
#include <cstdint>
#include <string>

namespace attnlab::cli {

struct DecodeBenchOptions {
  std::string config;       // S | M | L: the sizes V, T, d, h, L, d_ff of BENCHMARK.md
  std::string arch = "decoder";  // decoder | seq2seq
  int64_t V = 0, T = 0, d = 0, h = 0, layers = 0, d_ff = 0;
  int64_t batch = 0;        // sequences per greedy call
  int64_t reps = 3;         // timed calls per path (the median is reported)
  int threads = 1;
  uint64_t seed = 0;
  bool reference = true;    // also time the uncached path and compare the answers
};

// Prints one JSON line; returns the exit code.
int run_decode_bench(const DecodeBenchOptions& options);

}  // namespace attnlab::cli
