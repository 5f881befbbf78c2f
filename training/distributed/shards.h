#pragma once
// How N processes share out a model's parameters, taken as one flat buffer
// (the parameters one after the other): rank j owns elements
// [bounds[j], bounds[j+1]). The reduce-scatter sums its slice there, and with
// --shard-optimizer (ZeRO-1) it keeps the optimizer state of its slice only,
// updates its slice, and the updated slices are all-gathered. Every boundary
// lies at a parameter's start or a multiple of kOptimChunk elements into it
// (the optimizer's chunks and the gradient norm's, framework/optim/chunks.h),
// so every figure is computed over the same chunks as on one process, and the
// bits do not depend on N.
#include <cstdint>
#include <vector>

#include "framework/optim/optimizer.h"
#include "training/distributed/communicator.h"

namespace attnlab {

// The N + 1 boundaries for parameters of these element counts: each the
// allowed point nearest to P·j/N (the earlier one on a tie).
std::vector<int64_t> shard_bounds(const std::vector<int64_t>& sizes, int processes);

// Rank `rank`'s elements of each parameter.
std::vector<ElementRange> owned_ranges(const std::vector<int64_t>& sizes, const std::vector<int64_t>& bounds, int rank);

// The gradient norm of a sharded run (every rank's gradients hold the sum in
// its own slice only): each rank's chunk square sums, gathered, added in
// order: the bits of grad_norm over whole gradients.
double sharded_grad_norm(const Communicator& comm, const std::vector<Var>& params, const std::vector<int64_t>& bounds);

// Every rank's slice of the parameters' values (or gradients) brought to every rank.
void allgather_values(const Communicator& comm, const std::vector<Var>& params, const std::vector<int64_t>& bounds);
void allgather_gradients(const Communicator& comm, const std::vector<Var>& params, const std::vector<int64_t>& bounds);

// The state of a sharded optimizer as one process's would be (what a
// checkpoint holds), on every rank; an unsharded one's state() as it is.
NamedTensors full_optimizer_state(const Communicator& comm, const Optimizer& optimizer,
                                  const std::vector<int64_t>& bounds);

}  // namespace attnlab
