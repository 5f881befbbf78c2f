#pragma once
// The machine's fp32 FMA peak, measured: what the training benchmark's MFU is a
// share of (docs/benchmark.md); and its bf16 dot-product peak where the CPU
// has one (what --precision bf16's products could reach at most).

namespace attnlab::bench {

struct FmaPeak {
  double gflops = 0;   // best over the repeats, all threads together
  int lanes = 0;       // floats per vector of the loop (16 for AVX-512, 8 for AVX2, ...)
  int chains = 0;      // independent accumulators per thread
  bool fused = false;  // the build's vectors have a fused multiply-add (else multiply then add)
};

// One burst of `repeats` timed runs of independent vector FMAs on `threads`
// OpenMP threads at once (each thread its own chains, nothing shared), each
// run about `seconds` of the thread's CPU time; returns the sum over threads of
// each one's best rate per CPU-second, combined with `best` (max). Timing CPU
// time, not wall time, keeps preemption on a loaded machine out of the peak;
// the training benchmark still calls it before, between and after its timed
// steps.
FmaPeak measure_fma_peak(int threads, int repeats, double seconds, FmaPeak best = {});

// The same for the bf16 dot product (AVX512_BF16's VDPBF16PS, 64 flops per
// 512-bit instruction), timed alike, combined with `best` (max); 0 where the
// CPU lacks AVX512_BF16 (AMX tiles are not measured: where a CPU has AMX the
// products may run past this peak).
double measure_bf16_dot_peak(int threads, int repeats, double seconds, double best = 0);

}  // namespace attnlab::bench
