#pragma once
// attnlab bench --comm: what the collectives of data-parallel training cost
// between the processes of mpirun, as the latency alpha (seconds per
// collective) and the inverse bandwidth beta (seconds per byte received)
// of the alpha-beta model in docs/distributed.md.
#include <cstdint>

#include "training/distributed/communicator.h"

namespace attnlab::cli {

// Times MPI_Allgatherv and MPI_Alltoallv of 4 B to 4 MB per rank (the best
// of `reps` each, a barrier before each), fits alpha from the smallest and
// beta from the largest, and prints one JSON line from rank 0.
void run_comm_bench(const Communicator& comm, int64_t reps);

}  // namespace attnlab::cli
