#include "training/distributed/shards.h"

#include <algorithm>
#include <functional>
#include <map>

#include "framework/optim/chunks.h"
#include "framework/optim/clip.h"

namespace attnlab {

namespace {

std::vector<int64_t> sizes_of(const std::vector<Var>& params) {
  std::vector<int64_t> out;
  for (const Var& p : params) out.push_back(p.numel());
  return out;
}

std::vector<int64_t> slice_sizes(const std::vector<int64_t>& bounds) {
  std::vector<int64_t> out;
  for (size_t j = 0; j + 1 < bounds.size(); ++j) out.push_back(bounds[j + 1] - bounds[j]);
  return out;
}

// Every rank's slice of the flat buffer that `flat_of(p)` gives for each parameter, on every rank.
void allgather_flat(const Communicator& comm, const std::vector<Var>& params, const std::vector<int64_t>& bounds,
                    const std::function<Real*(Var&)>& flat_of) {
  const int64_t lo = bounds[static_cast<size_t>(comm.rank())], hi = bounds[static_cast<size_t>(comm.rank()) + 1];
  std::vector<Real> mine;
  mine.reserve(static_cast<size_t>(hi - lo));
  int64_t offset = 0;
  for (Var p : params) {  // Var is a handle: the copy shares value and gradient
    const int64_t b = std::clamp(lo - offset, int64_t{0}, p.numel()), e = std::clamp(hi - offset, int64_t{0}, p.numel());
    if (e > b) mine.insert(mine.end(), flat_of(p) + b, flat_of(p) + e);
    offset += p.numel();
  }
  const std::vector<Real> all = comm.allgatherv(mine, slice_sizes(bounds));
  offset = 0;
  for (Var p : params) {
    std::copy(all.begin() + offset, all.begin() + offset + p.numel(), flat_of(p));
    offset += p.numel();
  }
}

}  // namespace

std::vector<int64_t> shard_bounds(const std::vector<int64_t>& sizes, int processes) {
  std::vector<int64_t> points;  // where a slice may begin
  int64_t total = 0;
  for (int64_t n : sizes) {
    for (int64_t c = 0; c < n; c += kOptimChunk) points.push_back(total + c);
    total += n;
  }
  points.push_back(total);
  std::vector<int64_t> out;
  for (int j = 0; j <= processes; ++j) {
    const int64_t target = total * j / processes;
    const auto after = std::lower_bound(points.begin(), points.end(), target);  // the first point >= target
    int64_t best = *after;
    if (after != points.begin() && target - *(after - 1) <= *after - target) best = *(after - 1);
    out.push_back(best);
  }
  return out;
}

std::vector<ElementRange> owned_ranges(const std::vector<int64_t>& sizes, const std::vector<int64_t>& bounds, int rank) {
  const int64_t lo = bounds[static_cast<size_t>(rank)], hi = bounds[static_cast<size_t>(rank) + 1];
  std::vector<ElementRange> out;
  int64_t offset = 0;
  for (int64_t n : sizes) {
    const int64_t b = std::clamp(lo - offset, int64_t{0}, n), e = std::clamp(hi - offset, int64_t{0}, n);
    out.push_back(e > b ? ElementRange{b, e} : ElementRange{0, 0});
    offset += n;
  }
  return out;
}

double sharded_grad_norm(const Communicator& comm, const std::vector<Var>& params, const std::vector<int64_t>& bounds) {
  const std::vector<int64_t> sizes = sizes_of(params);
  std::vector<int64_t> counts;  // chunks of each rank
  std::vector<double> mine;
  for (int j = 0; j < comm.size(); ++j) {
    const std::vector<ElementRange> owned = owned_ranges(sizes, bounds, j);
    int64_t chunks = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].has_grad()) continue;
      chunks += (owned[i].size() + kOptimChunk - 1) / kOptimChunk;
      if (j == comm.rank()) chunk_square_sums(params[i].grad().data() + owned[i].begin, owned[i].size(), mine);
    }
    counts.push_back(chunks);
  }
  return norm_of(comm.allgatherv(mine, counts));
}

void allgather_values(const Communicator& comm, const std::vector<Var>& params, const std::vector<int64_t>& bounds) {
  allgather_flat(comm, params, bounds, [](Var& p) { return p.value().data(); });
}

void allgather_gradients(const Communicator& comm, const std::vector<Var>& params, const std::vector<int64_t>& bounds) {
  allgather_flat(comm, params, bounds, [](Var& p) {
    if (!p.has_grad()) p.grad() = Tensor(p.shape());
    return p.grad().data();
  });
}

NamedTensors full_optimizer_state(const Communicator& comm, const Optimizer& optimizer,
                                  const std::vector<int64_t>& bounds) {
  NamedTensors state = optimizer.state();
  if (!optimizer.sharded()) return state;
  const NamedParams& params = optimizer.params();
  std::vector<int64_t> sizes;
  for (const auto& p : params) sizes.push_back(p.second.numel());
  // Each buffer entry's place in `state`, by kind and parameter.
  std::map<std::string, size_t> index;
  for (size_t e = 0; e < state.size(); ++e) index[state[e].first] = e;
  const std::vector<std::string> kinds = optimizer.buffer_kinds();
  std::vector<Real> mine;  // this rank's owned elements of every buffer, kind by kind, parameter by parameter
  for (const std::string& kind : kinds)
    for (const auto& p : params) {
      const Tensor& t = state[index.at(kind + "." + p.first)].second;
      mine.insert(mine.end(), t.data(), t.data() + t.numel());
    }
  std::vector<int64_t> counts;
  for (int64_t n : slice_sizes(bounds)) counts.push_back(n * static_cast<int64_t>(kinds.size()));
  const std::vector<Real> all = comm.allgatherv(mine, counts);
  for (const std::string& kind : kinds)
    for (const auto& p : params) state[index.at(kind + "." + p.first)].second = Tensor(p.second.shape());
  const Real* at = all.data();
  for (int j = 0; j < comm.size(); ++j) {
    const std::vector<ElementRange> owned = owned_ranges(sizes, bounds, j);
    for (const std::string& kind : kinds)
      for (size_t i = 0; i < params.size(); ++i) {
        Tensor& t = state[index.at(kind + "." + params[i].first)].second;
        std::copy(at, at + owned[i].size(), t.data() + owned[i].begin);
        at += owned[i].size();
      }
  }
  return state;
}

}  // namespace attnlab
