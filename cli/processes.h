#pragma once
// The processes a command runs as: one, or the ranks `mpirun -np N` started
// (data-parallel training, training/communicator.h). A build without MPI
// has only the one-process stand-in, and refuses to run as one of N > 1.
#include <memory>

#include "training/communicator.h"

namespace attnlab::cli {

// The launcher's process count and rank from its environment (Open MPI's
// OMPI_COMM_WORLD_SIZE/RANK, or PMI_SIZE/RANK): 1 and 0 outside mpirun.
int launched_processes();
int launched_rank();

// MPI when launched as N > 1 processes, else the stand-in. ValueError when
// launched as N > 1 by a build without MPI. Lives until the command ends.
std::unique_ptr<Communicator> start_processes();

}  // namespace attnlab::cli
