// The record of matrix products (see gemm_log.h).
#include "framework/ops/gemm_log.h"

#include <atomic>
#include <stdexcept>

namespace attnlab {

namespace {
std::atomic<GemmLog*> g_log{nullptr};
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

}  // namespace attnlab
