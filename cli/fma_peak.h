#pragma once
// The machine's fp32 FMA peak, measured: what bench's MFU is a share of.
#include <string>

namespace attnlab::cli {

struct FmaPeak {
  double gflops = 0;   // best over the repeats, all threads together
  int lanes = 0;       // floats per vector of the loop (16 for AVX-512, 8 for AVX2, ...)
  int chains = 0;      // independent accumulators per thread
  bool fused = false;  // the build's vectors have a fused multiply-add (else multiply then add)
};

// One burst of `repeats` timed runs of independent vector FMAs on `threads`
// OpenMP threads (each thread its own chains, nothing shared), each run about
// `seconds` long; returns the best rate, combined with `best` (max). Call it
// several times (before, between and after the timed work) so a moment of
// load on a shared machine cannot lower the peak below what the work reached.
FmaPeak measure_fma_peak(int threads, int repeats, double seconds, FmaPeak best = {});

// The CPU's model name (/proc/cpuinfo), or "unknown".
std::string cpu_model();

}  // namespace attnlab::cli
