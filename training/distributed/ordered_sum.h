#pragma once
// The sum of a step's micro-batch gradients, in micro-batch order, on every
// process: M = N·K buffers of P elements (process r holds micro-batches
// r·K .. r·K + K − 1) become ((g_0 + g_1) + g_2) + ... for every element, the
// bits of one process summing all M. Two ways to get there, with the same
// bits (every element is the same ordered sum, by whichever rank computes it):
//   gather          every rank receives every buffer and sums all P elements:
//                   (M − K)·P elements in per rank; one collective
//   reduce_scatter  rank j owns a slice of about P/N elements: an all-to-all
//                   brings it the M contributions to its slice, it sums them
//                   in order, and an all-gather returns the summed slices:
//                   (M − K)·P/N + (N − 1)·P/N in per rank; two collectives
// MPI's own reductions are never used: the standard leaves their order free.
#include <cstdint>
#include <string>
#include <vector>

#include "training/distributed/communicator.h"

namespace attnlab {

enum class Reduction { automatic, gather, reduce_scatter };

Reduction parse_reduction(const std::string& text);  // auto | gather | reduce-scatter; ValueError otherwise
std::string reduction_name(Reduction r);

// The way `automatic` takes for P elements per micro-batch, N processes of K
// micro-batches: the one that receives fewer bytes (gather at N = 2, K = 1,
// where they tie), and gather while the buffers are small enough that a
// collective's latency outweighs them.
Reduction choose_reduction(int64_t elements, int processes, int64_t micro_per_process);

// local: the K buffers of this process, one after the other (K·P elements).
// Returns the P summed elements on every process.
std::vector<Real> ordered_sum(const Communicator& comm, const std::vector<Real>& local, int64_t micro_per_process,
                              Reduction how);

// [begin, end) of rank j's slice of P elements over N ranks (sizes differ by at most one).
int64_t slice_begin(int64_t elements, int processes, int rank);

}  // namespace attnlab
