// The replay of recorded matrix products (see gemm_replay.h).
#include "bench/gemm_replay.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "bench/timing.h"

namespace attnlab::bench {

namespace {

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

// The calls in order once; a run of calls one parallel region made runs in parallel again.
void run_all(const std::vector<GemmCall>& calls, Real* a, Real* b, std::vector<std::vector<Real>>& c) {
  for (size_t i = 0; i < calls.size();) {
    size_t end = i + 1;
    if (calls[i].in_parallel) {
      while (end < calls.size() && calls[end].in_parallel) ++end;
      const auto first = static_cast<int64_t>(i), last = static_cast<int64_t>(end);
#pragma omp parallel for schedule(static)
      for (int64_t j = first; j < last; ++j)
        run(calls[static_cast<size_t>(j)], a, b, c[static_cast<size_t>(omp_get_thread_num())].data());
    } else {
      run(calls[i], a, b, c[0].data());
    }
    i = end;
  }
}

// The key a product's row in the table is grouped by.
std::string shape_key(const GemmCall& call) {
  return std::to_string(call.c.rows) + " x " + std::to_string(call.c.cols) + " x " + std::to_string(call.a.op_cols()) +
         (call.a.trans ? ", Aᵀ" : "") + (call.b.trans ? ", Bᵀ" : "") + (call.accumulate ? ", +=" : "") +
         (call.count > 1 ? ", batch " + std::to_string(call.count) : "");
}

}  // namespace

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
    const auto start = Clock::now();
    run_all(calls, a.data(), b.data(), c);
    const double s = seconds_since(start);
    best = rep == 0 ? s : std::min(best, s);
  }
  return best;
}

void print_products_table(const std::vector<GemmCall>& calls, std::ostream& out) {
  std::vector<std::pair<std::string, std::vector<GemmCall>>> shapes;
  for (const GemmCall& call : calls) {
    const std::string key = shape_key(call);
    auto it = std::find_if(shapes.begin(), shapes.end(), [&](const auto& s) { return s.first == key; });
    if (it == shapes.end()) it = shapes.insert(shapes.end(), {key, {}});
    it->second.push_back(call);
  }
  std::vector<double> ms;
  double total = 0;
  for (const auto& [key, group] : shapes) total += ms.emplace_back(replay_seconds(group, 5) * 1e3);
  out << "\n| product (m x n x k) | calls | ms | share | GFLOP/s |\n|---|---|---|---|---|\n";
  char line[256];
  for (size_t i = 0; i < shapes.size(); ++i) {
    const double flops = total_flops(shapes[i].second);
    std::snprintf(line, sizeof line, "| %s | %zu | %.3f | %.1f%% | %.1f |\n", shapes[i].first.c_str(),
                  shapes[i].second.size(), ms[i], 100 * ms[i] / total, flops / ms[i] / 1e6);
    out << line;
  }
  std::snprintf(line, sizeof line, "| all, each shape alone | %zu | %.3f | 100%% | |\n", calls.size(), total);
  out << line;
}

}  // namespace attnlab::bench
