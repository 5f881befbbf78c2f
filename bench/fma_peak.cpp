// Calibrated loops of independent vector FMAs (fp32) and bf16 dot products.
// Each thread keeps kChains
// accumulators in registers and updates each one per step (acc = acc·m + a),
// so a step issues kChains FMAs with no dependence between them: enough to
// cover FMA latency × FMA ports on current cores (4-5 cycles × 2 ports needs
// 8-10 in flight). The vector type is Eigen's widest packet for the build's
// instruction set (-march), so the loop is portable; m and a come through
// volatile reads and the accumulators' sum is stored to a volatile, so the
// compiler can neither fold the loop nor drop it. The bf16 loop is compiled
// for AVX512_BF16 whatever the build's -march and run only where the CPU has
// it: acc = acc + a·b per pair of bf16 lanes (VDPBF16PS), 32 products and 32
// additions per 512-bit instruction.
#include "bench/fma_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <time.h>

#include <vector>

#include "framework/tensor.h"  // Eigen's packets (through the header that quiets GCC 12 about them)

namespace attnlab::bench {
namespace {

using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int kLanes = Eigen::internal::packet_traits<float>::size;
// Accumulators + the two operands must fit the register file (32 vector
// registers with AVX-512, 16 with AVX2/SSE): no spills inside the loop.
constexpr int kChains = EIGEN_ARCH_DEFAULT_NUMBER_OF_REGISTERS >= 32 ? 24 : 12;

volatile float g_mul = 0.999999f, g_add = 1e-6f;  // acc converges to 1: no overflow, no denormals
volatile float g_sink = 0;

// steps × kChains vector FMAs on this thread.
void fma_chains(int64_t steps) {
  const float mul = g_mul, add = g_add;
  const Packet m = Eigen::internal::pset1<Packet>(mul), a = Eigen::internal::pset1<Packet>(add);
  Packet acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Eigen::internal::pset1<Packet>(static_cast<float>(c));
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 32
    for (int c = 0; c < kChains; ++c) acc[c] = Eigen::internal::pmadd(acc[c], m, a);
  }
  Packet sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = Eigen::internal::padd(sum, acc[c]);
  g_sink = g_sink + Eigen::internal::predux(sum);
}

#if defined(__x86_64__) && defined(__GNUC__)
constexpr bool kBf16Loop = true;
constexpr int kBf16Chains = 24;          // AVX512_BF16 implies AVX-512's 32 vector registers
constexpr double kBf16FlopsPerDot = 64;  // 32 bf16 products and 32 additions into 16 floats
volatile uint16_t g_bf16 = 0x3580;       // 2^-20 in bf16: the sums stay small and normal

// steps × kBf16Chains VDPBF16PS on this thread.
__attribute__((target("avx512f,avx512bf16"))) void bf16_dot_chains(int64_t steps) {
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<int16_t>(g_bf16)));
  __m512 acc[kBf16Chains];
  for (int c = 0; c < kBf16Chains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 32
    for (int c = 0; c < kBf16Chains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, a);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kBf16Chains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);  // (not _mm512_reduce_add_ps: GCC 12's header warns in it)
  float total = 0;
  for (float v : lanes) total += v;
  g_sink = g_sink + total;
}
bool cpu_has_bf16_dot() { return __builtin_cpu_supports("avx512bf16"); }
#else
constexpr bool kBf16Loop = false;
constexpr int kBf16Chains = 0;
constexpr double kBf16FlopsPerDot = 0;
void bf16_dot_chains(int64_t) {}
bool cpu_has_bf16_dot() { return false; }
#endif

using Loop = void (*)(int64_t steps);

// CPU time of this thread: only the time it actually ran, so a run cut by
// preemption (a loaded, shared machine) still measures the core's rate. The
// rate is therefore an upper bound for any work run in the same wall time.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_for(Loop loop, int64_t steps) {
  const double t0 = thread_seconds();
  loop(steps);
  return thread_seconds() - t0;
}

// Every thread runs `repeats` runs of `steps` at once with the others, each run
// timed by the thread's own CPU clock; the result is the sum over the threads
// of each one's best rate. A thread descheduled by other work on the machine
// neither slows its own measurement nor the others' (as one wall clock around
// them all would). Where threads share a core (SMT) the sum can exceed what
// they reach together, so MFU against it errs low, never high.
double best_rate(Loop loop, double flops_per_step, int threads, int64_t steps, int repeats) {
  std::vector<double> best(static_cast<size_t>(threads), 0.0);
  const double flops = flops_per_step * static_cast<double>(steps);
#pragma omp parallel num_threads(threads)
  {
    double& mine = best[static_cast<size_t>(omp_get_thread_num())];
    for (int r = 0; r < repeats; ++r) mine = std::max(mine, flops / seconds_for(loop, steps));
  }
  double sum = 0;
  for (double b : best) sum += b;
  return sum;
}

// Calibrate on this thread: double the steps until the quickest of three runs
// takes a tenth of the target (the quickest: a run slowed by load must not
// shrink the work until timer and start-up costs matter), then scale; returns
// the best rate in GFLOP/s.
double measure_loop(Loop loop, double flops_per_step, int threads, int repeats, double seconds) {
  auto quickest = [&](int64_t n) {
    return std::min({seconds_for(loop, n), seconds_for(loop, n), seconds_for(loop, n)});
  };
  int64_t steps = 1 << 12;
  double t = quickest(steps);
  while (t < seconds / 10 && steps < (int64_t{1} << 40)) t = quickest(steps *= 2);
  steps = std::max(steps, static_cast<int64_t>(static_cast<double>(steps) * seconds / std::max(t, 1e-9)));
  return best_rate(loop, flops_per_step, threads, steps, repeats) / 1e9;
}

}  // namespace

FmaPeak measure_fma_peak(int threads, int repeats, double seconds, FmaPeak best) {
  best.lanes = kLanes;
  best.chains = kChains;
#ifdef EIGEN_VECTORIZE_FMA
  best.fused = true;
#endif
  const double flops_per_step = 2.0 * kLanes * kChains;  // an FMA is 2 flops
  best.gflops = std::max(best.gflops, measure_loop(fma_chains, flops_per_step, threads, repeats, seconds));
  return best;
}

double measure_bf16_dot_peak(int threads, int repeats, double seconds, double best) {
  if (!kBf16Loop || !cpu_has_bf16_dot()) return 0;
  return std::max(best, measure_loop(bf16_dot_chains, kBf16FlopsPerDot * kBf16Chains, threads, repeats, seconds));
}

}  // namespace attnlab::bench
