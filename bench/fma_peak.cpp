// A calibrated loop of independent vector FMAs. Each thread keeps kChains
// accumulators in registers and updates each one per step (acc = acc·m + a),
// so a step issues kChains FMAs with no dependence between them: enough to
// cover FMA latency × FMA ports on current cores (4-5 cycles × 2 ports needs
// 8-10 in flight). The vector type is Eigen's widest packet for the build's
// instruction set (-march), so the loop is portable; m and a come through
// volatile reads and the accumulators' sum is stored to a volatile, so the
// compiler can neither fold the loop nor drop it.
#include "bench/fma_peak.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <time.h>

#include <fstream>
#include <vector>

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

// CPU time of this thread: only the time it actually ran, so a run cut by
// preemption (a loaded, shared machine) still measures the core's rate. The
// rate is therefore an upper bound for any work run in the same wall time.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_for(int64_t steps) {
  const double t0 = thread_seconds();
  fma_chains(steps);
  return thread_seconds() - t0;
}

// Every thread runs `repeats` runs of `steps` at once with the others, each run
// timed by the thread's own CPU clock; the result is the sum over the threads
// of each one's best rate. A thread descheduled by other work on the machine
// neither slows its own measurement nor the others' (as one wall clock around
// them all would). Where threads share a core (SMT) the sum can exceed what
// they reach together, so MFU against it errs low, never high.
double best_rate(int threads, int64_t steps, int repeats) {
  std::vector<double> best(static_cast<size_t>(threads), 0.0);
  const double flops = 2.0 * kLanes * kChains * static_cast<double>(steps);  // an FMA is 2 flops
#pragma omp parallel num_threads(threads)
  {
    double& mine = best[static_cast<size_t>(omp_get_thread_num())];
    for (int r = 0; r < repeats; ++r) mine = std::max(mine, flops / seconds_for(steps));
  }
  double sum = 0;
  for (double b : best) sum += b;
  return sum;
}

}  // namespace

FmaPeak measure_fma_peak(int threads, int repeats, double seconds, FmaPeak best) {
  best.lanes = kLanes;
  best.chains = kChains;
#ifdef EIGEN_VECTORIZE_FMA
  best.fused = true;
#endif
  // Calibrate on this thread: double the steps until the quickest of three
  // runs takes a tenth of the target (the quickest: a run slowed by load must
  // not shrink the work until timer and start-up costs matter), then scale.
  auto quickest = [](int64_t n) { return std::min({seconds_for(n), seconds_for(n), seconds_for(n)}); };
  int64_t steps = 1 << 12;
  double t = quickest(steps);
  while (t < seconds / 10 && steps < (int64_t{1} << 40)) t = quickest(steps *= 2);
  steps = std::max(steps, static_cast<int64_t>(static_cast<double>(steps) * seconds / std::max(t, 1e-9)));
  best.gflops = std::max(best.gflops, best_rate(threads, steps, repeats) / 1e9);
  return best;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

}  // namespace attnlab::bench
