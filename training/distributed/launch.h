#pragma once
// The Communicator a command runs with: the one-process stand-in, or MPI's
// when `mpirun -np N` started it as N > 1 processes. A build without MPI has
// only the stand-in, and refuses to run as one of N > 1. Not installed: it is
// the executable's (it links MPI), the library takes a Communicator.
#include <memory>

#include "training/distributed/communicator.h"

namespace attnlab {

// The launcher's process count and rank from its environment (Open MPI's
// OMPI_COMM_WORLD_SIZE/RANK, or PMI_SIZE/RANK): 1 and 0 outside mpirun.
int launched_size();
int launched_rank();

// MPI when launched as N > 1 processes, else the stand-in. ValueError when
// launched as N > 1 by a build without MPI. Lives until the command ends.
std::unique_ptr<Communicator> start_communicator();

}  // namespace attnlab
