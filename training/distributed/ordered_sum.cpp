#include "training/distributed/ordered_sum.h"

#include <algorithm>
#include <map>
#include <utility>

#include "framework/error.h"

namespace attnlab {

namespace {

// Below this many bytes per gradient the gather's one collective is taken
// whatever it moves: a collective's latency (tens of microseconds over shared
// memory) then outweighs the bytes. A round figure, not a tuned one.
constexpr int64_t kGatherBelowBytes = 256 * 1024;

// Where node [lo, hi) splits: lo + the largest power of two below hi − lo.
int64_t split_point(int64_t lo, int64_t hi) {
  int64_t p = 1;
  while (2 * p < hi - lo) p *= 2;
  return lo + p;
}

void cover(int64_t lo, int64_t hi, int64_t begin, int64_t end, std::vector<SumNode>& out) {
  if (hi <= begin || end <= lo) return;
  if (begin <= lo && hi <= end) {
    out.push_back({lo, hi});
    return;
  }
  const int64_t mid = split_point(lo, hi);
  cover(lo, mid, begin, end, out);
  cover(mid, hi, begin, end, out);
}

void add_into(std::vector<Real>& left, const std::vector<Real>& right) {
  for (size_t e = 0; e < left.size(); ++e) left[e] += right[e];
}

std::vector<Real> evaluate(int64_t lo, int64_t hi, const std::function<std::vector<Real>(int64_t)>& leaf) {
  if (hi - lo == 1) return leaf(lo);
  const int64_t mid = split_point(lo, hi);
  std::vector<Real> sum = evaluate(lo, mid, leaf);
  add_into(sum, evaluate(mid, hi, leaf));
  return sum;
}

// Node [lo, hi) of `leaves` at elements [at, at + n), n <= kTreeChunk, into out.
constexpr int64_t kTreeChunk = 1024;
void tree_chunk(const std::vector<const Real*>& leaves, int64_t lo, int64_t hi, int64_t at, int64_t n, Real* out) {
  if (hi - lo == 1) {
    const Real* leaf = leaves[static_cast<size_t>(lo)];
    if (!leaf) std::fill(out, out + n, Real(0));
    else if (leaf + at != out) std::copy(leaf + at, leaf + at + n, out);
    return;
  }
  const int64_t mid = split_point(lo, hi);
  tree_chunk(leaves, lo, mid, at, n, out);
  Real right[kTreeChunk];
  tree_chunk(leaves, mid, hi, at, n, right);
  for (int64_t e = 0; e < n; ++e) out[e] += right[e];
}

// The given partial sums: node -> its `count` elements.
using Given = std::map<std::pair<int64_t, int64_t>, const Real*>;

// Node [lo, hi) of `count` elements, from the given partial sums below it.
std::vector<Real> finish(int64_t lo, int64_t hi, const Given& given, int64_t count) {
  if (const auto it = given.find({lo, hi}); it != given.end()) return {it->second, it->second + count};
  if (hi - lo == 1) throw std::logic_error("ordered_sum: micro-batch " + std::to_string(lo) + " has no partial sum");
  const int64_t mid = split_point(lo, hi);
  std::vector<Real> sum = finish(lo, mid, given, count);
  add_into(sum, finish(mid, hi, given, count));
  return sum;
}

// Every rank's nodes, in rank order.
std::vector<std::vector<SumNode>> all_nodes(int processes, int64_t K) {
  std::vector<std::vector<SumNode>> out;
  for (int r = 0; r < processes; ++r) out.push_back(subtrees_within(processes * K, r * K, (r + 1) * K));
  return out;
}

std::vector<Real> gather_sum(const Communicator& comm, const std::vector<Real>& partials, int64_t K, int64_t P) {
  const auto nodes = all_nodes(comm.size(), K);
  std::vector<int64_t> counts;
  for (const auto& n : nodes) counts.push_back(static_cast<int64_t>(n.size()) * P);
  const std::vector<Real> all = comm.allgatherv(partials, counts);
  Given given;
  const Real* at = all.data();
  for (const auto& rank_nodes : nodes)
    for (const SumNode& n : rank_nodes) given[{n.lo, n.hi}] = at, at += P;
  return finish(0, comm.size() * K, given, P);
}

std::vector<Real> reduce_scatter_sum(const Communicator& comm, const std::vector<Real>& partials, int64_t K, int64_t P,
                                     const std::vector<int64_t>& bounds, bool slice_only) {
  const int N = comm.size(), me = comm.rank();
  const auto nodes = all_nodes(N, K);
  const int64_t mine = static_cast<int64_t>(nodes[static_cast<size_t>(me)].size());
  std::vector<int64_t> slice(static_cast<size_t>(N)), send_counts(static_cast<size_t>(N)),
      recv_counts(static_cast<size_t>(N));
  std::vector<Real> send;
  send.reserve(partials.size());
  const int64_t lo_me = bounds[static_cast<size_t>(me)], len_me = bounds[static_cast<size_t>(me) + 1] - lo_me;
  for (int j = 0; j < N; ++j) {  // to rank j: its slice of each of this rank's partial sums
    const int64_t lo = bounds[static_cast<size_t>(j)], hi = bounds[static_cast<size_t>(j) + 1];
    slice[static_cast<size_t>(j)] = hi - lo;
    send_counts[static_cast<size_t>(j)] = mine * (hi - lo);
    recv_counts[static_cast<size_t>(j)] = static_cast<int64_t>(nodes[static_cast<size_t>(j)].size()) * len_me;
    for (int64_t s = 0; s < mine; ++s)
      send.insert(send.end(), partials.begin() + s * P + lo, partials.begin() + s * P + hi);
  }
  // From rank i, in rank order: its partial sums' parts of this rank's slice.
  const std::vector<Real> parts = comm.alltoallv(send, send_counts, recv_counts);
  Given given;
  const Real* at = parts.data();
  for (const auto& rank_nodes : nodes)
    for (const SumNode& n : rank_nodes) given[{n.lo, n.hi}] = at, at += len_me;
  const std::vector<Real> summed = finish(0, N * K, given, len_me);
  if (!slice_only) return comm.allgatherv(summed, slice);
  std::vector<Real> out(static_cast<size_t>(P), Real(0));
  std::copy(summed.begin(), summed.end(), out.begin() + lo_me);
  return out;
}

}  // namespace

const ChoiceNames<Reduction>& choice_names(Reduction) {
  static const ChoiceNames<Reduction> names = {
      {Reduction::automatic, "auto"}, {Reduction::gather, "gather"}, {Reduction::reduce_scatter, "reduce-scatter"}};
  return names;
}

std::vector<SumNode> subtrees_within(int64_t micro_batches, int64_t begin, int64_t end) {
  std::vector<SumNode> out;
  cover(0, micro_batches, begin, end, out);
  return out;
}

void tree_sum(const std::vector<const Real*>& leaves, Real* out, int64_t count) {
  if (leaves.empty()) throw std::logic_error("tree_sum: no leaves");
  const int64_t n = static_cast<int64_t>(leaves.size());
  for (int64_t at = 0; at < count; at += kTreeChunk)
    tree_chunk(leaves, 0, n, at, std::min(kTreeChunk, count - at), out + at);
}

std::vector<Real> local_partial_sums(int64_t micro_batches, int64_t begin, int64_t end,
                                     const std::function<std::vector<Real>(int64_t)>& leaf) {
  std::vector<Real> out;
  for (const SumNode& n : subtrees_within(micro_batches, begin, end)) {
    const std::vector<Real> sum = evaluate(n.lo, n.hi, leaf);
    out.insert(out.end(), sum.begin(), sum.end());
  }
  return out;
}

Reduction choose_reduction(int64_t elements, int processes, int64_t micro_per_process) {
  const double N = processes, P = static_cast<double>(elements);
  double S = 0;  // partial sums of all ranks
  for (const auto& n : all_nodes(processes, micro_per_process)) S += static_cast<double>(n.size());
  const double gather_in = S * P * (N - 1) / N, scatter_in = S * P / N * (N - 1) / N + (N - 1) * P / N;
  if (gather_in <= scatter_in || elements * static_cast<int64_t>(sizeof(Real)) < kGatherBelowBytes)
    return Reduction::gather;
  return Reduction::reduce_scatter;
}

std::vector<Real> ordered_sum(const Communicator& comm, const std::vector<Real>& partials, int64_t micro_per_process,
                              const std::vector<int64_t>& bounds, Reduction how, bool slice_only) {
  const int64_t K = micro_per_process, P = bounds.back();
  if (how == Reduction::automatic) how = choose_reduction(P, comm.size(), K);
  if (comm.size() == 1 || how == Reduction::gather) return gather_sum(comm, partials, K, P);
  return reduce_scatter_sum(comm, partials, K, P, bounds, slice_only);
}

}  // namespace attnlab
