#include "cli/comm_bench.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/cpu_info.h"

namespace attnlab::cli {

namespace {

// The best of `reps` timings of `collective` on this rank, each after a barrier.
double best_seconds(const Communicator& comm, int64_t reps, const std::function<void()>& collective) {
  double best = 1e30;
  for (int64_t r = 0; r < reps; ++r) {
    comm.any(false);  // a barrier: every rank starts together
    const auto start = std::chrono::steady_clock::now();
    collective();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// One collective over sizes of `elements` per rank: the rows, alpha and beta.
nlohmann::json measure(const Communicator& comm, int64_t reps, bool all_to_all) {
  const int N = comm.size();
  nlohmann::json rows = nlohmann::json::array();
  double alpha = 0, beta = 0;
  for (int64_t n : {int64_t{1}, int64_t{1} << 8, int64_t{1} << 12, int64_t{1} << 16, int64_t{1} << 20}) {
    const std::vector<int64_t> counts(static_cast<size_t>(N), n);
    const std::vector<Real> local(static_cast<size_t>(all_to_all ? n * N : n), Real(1));
    const double s = best_seconds(comm, reps, [&] {
      if (all_to_all) comm.alltoallv(local, counts, counts);
      else comm.allgatherv(local, counts);
    });
    const double bytes_in = static_cast<double>((N - 1) * n) * sizeof(Real);
    rows.push_back({{"bytes_received", bytes_in}, {"seconds", s}});
    if (n == 1) alpha = s;
    beta = (s - alpha) / bytes_in;  // the largest size's, at the end
  }
  return {{"sizes", rows}, {"alpha_s", alpha}, {"beta_s_per_byte", beta}, {"gbit_per_s", 8 / beta / 1e9}};
}

}  // namespace

void run_comm_bench(const Communicator& comm, int64_t reps) {
  nlohmann::json out = bench::cpu_json();
  out.update({{"processes", comm.size()}, {"reps", reps}});
  out["allgatherv"] = measure(comm, reps, false);
  out["alltoallv"] = measure(comm, reps, true);
  if (comm.is_root()) std::cout << out.dump() << std::endl;
}

}  // namespace attnlab::cli
