#include "training/distributed/ordered_sum.h"

#include "framework/error.h"

namespace attnlab {

namespace {

// Below this many bytes per micro-batch buffer the gather's one collective is
// taken whatever it moves: a collective's latency (tens of microseconds over
// shared memory) then outweighs the bytes. A round figure, not a tuned one.
constexpr int64_t kGatherBelowBytes = 256 * 1024;

// out[e] = c_0[e] + c_1[e] + ... + c_{M-1}[e], summed left to right, where
// contribution m of element e lies at parts[m·stride + e].
std::vector<Real> sum_in_order(const Real* parts, int64_t count, int64_t stride, int64_t contributions) {
  std::vector<Real> out(parts, parts + count);
  for (int64_t m = 1; m < contributions; ++m) {
    const Real* c = parts + m * stride;
    for (int64_t e = 0; e < count; ++e) out[static_cast<size_t>(e)] += c[e];
  }
  return out;
}

std::vector<Real> gather_sum(const Communicator& comm, const std::vector<Real>& local, int64_t K) {
  const int64_t P = static_cast<int64_t>(local.size()) / K;
  const std::vector<Real> all = comm.allgather(local);  // M buffers in micro-batch order
  return sum_in_order(all.data(), P, P, K * comm.size());
}

std::vector<Real> reduce_scatter_sum(const Communicator& comm, const std::vector<Real>& local, int64_t K) {
  const int N = comm.size(), me = comm.rank();
  const int64_t P = static_cast<int64_t>(local.size()) / K;
  std::vector<int64_t> slice(static_cast<size_t>(N)), send_counts(static_cast<size_t>(N));
  std::vector<Real> send;
  send.reserve(local.size());
  for (int j = 0; j < N; ++j) {  // to rank j: its slice of each of this rank's K buffers
    const int64_t lo = slice_begin(P, N, j), hi = slice_begin(P, N, j + 1);
    slice[static_cast<size_t>(j)] = hi - lo;
    send_counts[static_cast<size_t>(j)] = K * (hi - lo);
    for (int64_t k = 0; k < K; ++k) send.insert(send.end(), local.begin() + k * P + lo, local.begin() + k * P + hi);
  }
  const int64_t mine = slice[static_cast<size_t>(me)];
  const std::vector<int64_t> recv_counts(static_cast<size_t>(N), K * mine);
  // From rank i, in rank order: micro-batches i·K .. i·K + K − 1 of this rank's slice.
  const std::vector<Real> parts = comm.alltoallv(send, send_counts, recv_counts);
  const std::vector<Real> summed = sum_in_order(parts.data(), mine, mine, K * N);
  return comm.allgatherv(summed, slice);
}

}  // namespace

Reduction parse_reduction(const std::string& text) {
  if (text == "auto") return Reduction::automatic;
  if (text == "gather") return Reduction::gather;
  if (text == "reduce-scatter") return Reduction::reduce_scatter;
  throw ValueError("unknown gradient reduction '" + text + "': expected auto, gather or reduce-scatter");
}

std::string reduction_name(Reduction r) {
  switch (r) {
    case Reduction::automatic: return "auto";
    case Reduction::gather: return "gather";
    case Reduction::reduce_scatter: return "reduce-scatter";
  }
  return "auto";
}

Reduction choose_reduction(int64_t elements, int processes, int64_t micro_per_process) {
  const int64_t N = processes, K = micro_per_process, P = elements;
  const int64_t gather_in = (N - 1) * K * P, scatter_in = (N - 1) * K * P / N + (N - 1) * P / N;
  if (gather_in <= scatter_in || P * static_cast<int64_t>(sizeof(Real)) < kGatherBelowBytes) return Reduction::gather;
  return Reduction::reduce_scatter;
}

int64_t slice_begin(int64_t elements, int processes, int rank) {
  return elements * rank / processes;
}

std::vector<Real> ordered_sum(const Communicator& comm, const std::vector<Real>& local, int64_t micro_per_process,
                              Reduction how) {
  const int64_t K = micro_per_process;
  if (how == Reduction::automatic) how = choose_reduction(static_cast<int64_t>(local.size()) / K, comm.size(), K);
  if (comm.size() == 1 || how == Reduction::gather) return gather_sum(comm, local, K);
  return reduce_scatter_sum(comm, local, K);
}

}  // namespace attnlab
