#pragma once
// A record of the matrix products some code makes through gemm() and
// gemm_batched(): the hook a benchmark needs, and nothing more. The training
// benchmark (bench/training.cpp) records one step and replays its products
// alone (bench/gemm_replay.h) to bound the step's speed by its products.
//
// Only the calls made while a GemmLog is alive are recorded, one log at a time;
// a product gemm_batched() makes is recorded once, as the batched call. Calls
// made inside an OpenMP parallel region (the attention core's per-head
// products) are marked so, which lets a replay run them in parallel again.
#include <cstdint>
#include <mutex>
#include <vector>

#include "framework/ops/gemm.h"

namespace attnlab {

// One gemm() call (count 1, strides 0) or one gemm_batched() call.
struct GemmCall {
  int64_t count = 1;
  GemmOutput c{};
  int64_t c_stride = 0;
  GemmOperand a{}, b{};
  int64_t a_stride = 0, b_stride = 0;
  Real alpha = 1;
  bool accumulate = false;
  bool in_parallel = false;  // made from inside an OpenMP parallel region

  // 2·m·n·k per product, times count.
  double flops() const;
};

// The sum of the calls' flops().
double total_flops(const std::vector<GemmCall>& calls);

class GemmLog {
 public:
  GemmLog();  // starts recording; throws std::logic_error if another log is alive
  ~GemmLog();
  GemmLog(const GemmLog&) = delete;
  GemmLog& operator=(const GemmLog&) = delete;

  // The calls in the order they were made (those of one parallel region in the
  // order their threads made them).
  std::vector<GemmCall> calls() const;
  double flops() const;  // total_flops(calls())

  void record(const GemmCall& call);  // called by gemm.cpp

 private:
  mutable std::mutex mutex_;
  std::vector<GemmCall> calls_;
};

namespace detail {
GemmLog* active_gemm_log();  // the recording log, or nullptr
}

}  // namespace attnlab
