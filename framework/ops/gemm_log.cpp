// The record and replay of matrix products (see gemm_log.h).
#include "framework/ops/gemm_log.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>

namespace attnlab {

namespace {
std::atomic<GemmLog*> g_log{nullptr};

// Elements from the first to one past the last that a matrix view touches,
// over all `count` matrices of a batched call.
int64_t extent(int64_t rows, int64_t cols, int64_t ld, int64_t count, int64_t stride) {
  return (count - 1) * stride + (rows - 1) * ld + cols;
}
int64_t extent(const GemmOperand& o, int64_t count, int64_t stride) {
  return extent(o.rows, o.cols, o.ld, count, stride);
}

// A gemm() call is a batch of one (gemm_batched makes the same product).
void run(const GemmCall& call, Real* a, Real* b, Real* c) {
  GemmOperand x = call.a, y = call.b;
  GemmOutput z = call.c;
  x.data = a, y.data = b, z.data = c;
  gemm_batched(call.count, z, call.c_stride, x, call.a_stride, y, call.b_stride, call.alpha, call.accumulate);
}
}  // namespace

double GemmCall::flops() const {
  return 2.0 * static_cast<double>(count) * static_cast<double>(c.rows) * static_cast<double>(c.cols) *
         static_cast<double>(a.op_cols());
}

GemmLog::GemmLog() {
  GemmLog* none = nullptr;
  if (!g_log.compare_exchange_strong(none, this)) throw std::logic_error("GemmLog: another log is already recording");
}

GemmLog::~GemmLog() { g_log.store(nullptr); }

std::vector<GemmCall> GemmLog::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

double total_flops(const std::vector<GemmCall>& calls) {
  double sum = 0;
  for (const GemmCall& call : calls) sum += call.flops();
  return sum;
}

double GemmLog::flops() const { return total_flops(calls()); }

void GemmLog::record(const GemmCall& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  calls_.push_back(call);
}

GemmLog* detail::active_gemm_log() { return g_log.load(std::memory_order_relaxed); }

double replay_seconds(const std::vector<GemmCall>& calls, int repeats) {
  int64_t a_size = 1, b_size = 1, c_size = 1;
  for (const GemmCall& call : calls) {
    a_size = std::max(a_size, extent(call.a, call.count, call.a_stride));
    b_size = std::max(b_size, extent(call.b, call.count, call.b_stride));
    c_size = std::max(c_size, extent(call.c.rows, call.c.cols, call.c.ld, call.count, call.c_stride));
  }
  // Small values keep every accumulation finite and far from denormals over any number of repeats.
  std::vector<Real> a(static_cast<size_t>(a_size), Real(1e-3)), b(static_cast<size_t>(b_size), Real(1e-3));
  const int threads = omp_get_max_threads();
  std::vector<std::vector<Real>> c(static_cast<size_t>(threads), std::vector<Real>(static_cast<size_t>(c_size), 0));
  double best = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < calls.size();) {
      size_t end = i + 1;
      if (calls[i].in_parallel) {  // a run of calls one parallel region made: in parallel again
        while (end < calls.size() && calls[end].in_parallel) ++end;
        const auto first = static_cast<int64_t>(i), last = static_cast<int64_t>(end);
#pragma omp parallel for schedule(static)
        for (int64_t j = first; j < last; ++j)
          run(calls[static_cast<size_t>(j)], a.data(), b.data(), c[static_cast<size_t>(omp_get_thread_num())].data());
      } else {
        run(calls[i], a.data(), b.data(), c[0].data());
      }
      i = end;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = rep == 0 ? s : std::min(best, s);
  }
  return best;
}

}  // namespace attnlab
