#pragma once
// Private to framework/ops: the broadcasting walk shared by the binary
// elementwise ops and masked_fill, and a chunked parallel loop for
// elementwise kernels.
//
// A BroadcastPlan right-aligns two shapes, drops size-1 output dims and
// merges neighbouring dims that both operands traverse the same way
// (contiguously or not at all). What is left is usually one or two dims: the
// same shape is one contiguous run, a scalar is one run with stride 0, a
// trailing row (bias) is rows of contiguous runs with b's stride reset to 0, a
// column (per-row scale) is runs along which a's stride is 0. Kernels then
// see runs of `n` outputs with operand strides 0 or 1.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "framework/tensor.h"

namespace attnlab::detail {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelGrain = 1 << 15;

// Calls fn(begin, end) over [0, n) in contiguous chunks, in parallel when n is
// large. Each index is visited by exactly one call, so writes per index are safe.
template <class Fn>
void parallel_chunks(int64_t n, Fn fn) {
  if (n < 2 * kParallelGrain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(n / kParallelGrain, 4 * omp_get_max_threads());
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) fn(n * c / chunks, n * (c + 1) / chunks);
}

struct BroadcastPlan {
  Shape out_shape;
  int64_t numel = 0;
  // Collapsed output dims, outermost first, with each operand's element
  // stride per dim (0 where it is broadcast). Empty when numel <= 1.
  std::vector<int64_t> sizes, stride_a, stride_b;
  bool a_full = false;  // a has the output's shape: each output maps to its own a element
  bool b_full = false;

  int64_t inner() const { return sizes.empty() ? numel : sizes.back(); }
  int64_t runs() const { return inner() ? numel / inner() : 0; }
  int64_t inner_stride_a() const { return sizes.empty() ? 0 : stride_a.back(); }
  int64_t inner_stride_b() const { return sizes.empty() ? 0 : stride_b.back(); }
  // Offsets into a and b of the first element of run r.
  void run_offsets(int64_t r, int64_t& ia, int64_t& ib) const {
    ia = ib = 0;
    for (int d = static_cast<int>(sizes.size()) - 2; d >= 0 && r > 0; --d) {
      int64_t i = r % sizes[static_cast<size_t>(d)];
      r /= sizes[static_cast<size_t>(d)];
      ia += i * stride_a[static_cast<size_t>(d)];
      ib += i * stride_b[static_cast<size_t>(d)];
    }
  }
};

// Throws ShapeError "<op>: shapes A and B do not broadcast" when they do not.
BroadcastPlan make_broadcast_plan(const Shape& a, const Shape& b, const char* op);

// Calls run(o, ia, ib, n, sa, sb) for every run of n outputs starting at
// output o, a-offset ia, b-offset ib, with inner strides sa, sb (0 or 1).
// Runs visit distinct outputs, so parallel = true is safe whenever run()
// writes only to the outputs (or to an operand that has the output's shape).
template <class Run>
void for_each_run(const BroadcastPlan& p, bool parallel, Run run) {
  const int64_t n = p.inner(), runs = p.runs(), sa = p.inner_stride_a(), sb = p.inner_stride_b();
  if (runs == 1) {
    // One long run (same shape or scalar): split it into chunks instead.
    if (parallel) {
      parallel_chunks(n, [&](int64_t lo, int64_t hi) { run(lo, lo * sa, lo * sb, hi - lo, sa, sb); });
    } else {
      run(int64_t{0}, int64_t{0}, int64_t{0}, n, sa, sb);
    }
    return;
  }
  auto range = [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t ia, ib;
      p.run_offsets(r, ia, ib);
      run(r * n, ia, ib, n, sa, sb);
    }
  };
  if (parallel && p.numel >= 2 * kParallelGrain && runs > 1 && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < runs; ++r) range(r, r + 1);
  } else {
    range(0, runs);
  }
}

// The elementwise loop of one run, specialised on the strides so that each
// case compiles to a tight (vectorisable) loop. f(k, x, y) gets the position k
// within the run and the operand values.
template <class F>
inline void run_loop(const Real* a, const Real* b, int64_t n, int64_t sa, int64_t sb, F f) {
  if (sa == 1 && sb == 1) {
    for (int64_t k = 0; k < n; ++k) f(k, a[k], b[k]);
  } else if (sa == 1) {
    const Real y = b[0];
    for (int64_t k = 0; k < n; ++k) f(k, a[k], y);
  } else if (sb == 1) {
    const Real x = a[0];
    for (int64_t k = 0; k < n; ++k) f(k, x, b[k]);
  } else {
    const Real x = a[0], y = b[0];
    for (int64_t k = 0; k < n; ++k) f(k, x, y);
  }
}

}  // namespace attnlab::detail
