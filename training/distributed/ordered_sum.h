#pragma once
// The sum of a step's M = N·K micro-batch gradients on every process, with
// the bits of one process summing all M: every element is summed over one
// fixed binary tree over the micro-batch index, which depends on M alone.
// Node [lo, hi) of more than one micro-batch is [lo, mid) + [mid, hi), where
// mid − lo is the largest power of two below hi − lo (so ((g0 + g1) + g2) for
// 3, (g0 + g1) + (g2 + g3) for 4). Process r computes micro-batches
// r·K .. r·K + K − 1 and sums locally the largest subtrees inside that range
// (subtrees_within): one subtree when K is a power of two (every aligned run of
// 2^b micro-batches is a subtree), at most about 2·log2(K) otherwise. Only these
// partial sums cross between processes, in one of two ways with the same bits:
//   gather          every rank receives every partial sum and finishes the
//                   tree for all P elements: (S − S_r)·P elements in per rank,
//                   S the partial sums of all ranks; one collective
//   reduce_scatter  rank j owns elements [bounds[j], bounds[j+1]): an all-to-all
//                   brings it every partial sum of its slice, it finishes the
//                   tree there, and an all-gather returns the summed slices:
//                   (S − S_r)·P/N + (N − 1)·P/N in per rank; two collectives
// MPI's own reductions are never used: the standard leaves their order free.
#include <cstdint>
#include <functional>
#include <vector>

#include "training/distributed/communicator.h"
#include "training/distributed/reduction.h"

namespace attnlab {

// A node of the summation tree: micro-batches [lo, hi).
struct SumNode {
  int64_t lo = 0, hi = 0;
  bool operator==(const SumNode& o) const { return lo == o.lo && hi == o.hi; }
};

// The largest subtrees of the tree over `micro_batches` leaves that lie inside [begin, end), left to right.
std::vector<SumNode> subtrees_within(int64_t micro_batches, int64_t begin, int64_t end);

// out[i] = leaves[0][i] + ... + leaves[n-1][i] for i < count, summed over the
// tree of n leaves above (so with the bits of local_partial_sums over n
// micro-batches); a null leaf counts as zeros, and out may be leaves[0].
void tree_sum(const std::vector<const Real*>& leaves, Real* out, int64_t count);

// The partial sums of micro-batches [r·K, r·K + K) of M, one buffer after the
// other in subtrees_within's order. leaf(m) returns micro-batch m's gradient;
// it is called for m = r·K, r·K + 1, ... in order, and at most about log2(K)
// buffers are held at once.
std::vector<Real> local_partial_sums(int64_t micro_batches, int64_t begin, int64_t end,
                                     const std::function<std::vector<Real>(int64_t)>& leaf);

// The way `automatic` takes for P elements, N processes of K micro-batches:
// the one that receives fewer bytes (gather where they tie), and gather while
// a gradient is small enough that a collective's latency outweighs it.
Reduction choose_reduction(int64_t elements, int processes, int64_t micro_per_process);

// partials: this process's local_partial_sums (a multiple of P elements);
// bounds: the N + 1 slice boundaries of the P elements (bounds[0] = 0,
// bounds[N] = P), as shard_bounds gives them. Returns the P summed elements.
// With slice_only, the reduce-scatter way skips its all-gather: only this
// rank's slice holds the sum, the other elements are 0 (a sharded optimizer
// needs no more); the gather way always returns everything.
std::vector<Real> ordered_sum(const Communicator& comm, const std::vector<Real>& partials, int64_t micro_per_process,
                              const std::vector<int64_t>& bounds, Reduction how, bool slice_only = false);

}  // namespace attnlab
