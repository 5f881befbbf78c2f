#include "training/distributed/launch.h"

#include <cstdlib>
#include <string>

#include "framework/error.h"

namespace attnlab {

#ifdef ATTNLAB_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator();  // mpi.cpp
#endif

namespace {

int env_number(const char* first, const char* second, int fallback) {
  for (const char* name : {first, second})
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return fallback;
}

}  // namespace

int launched_size() { return env_number("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", 1); }
int launched_rank() { return env_number("OMPI_COMM_WORLD_RANK", "PMI_RANK", 0); }

std::unique_ptr<Communicator> start_communicator() {
  if (launched_size() <= 1) return std::make_unique<Communicator>();
#ifdef ATTNLAB_HAVE_MPI
  return make_mpi_communicator();
#else
  throw ValueError("this attnlab was built without MPI, so it cannot train as one of " +
                   std::to_string(launched_size()) +
                   " processes; install libopenmpi-dev and rebuild, or run it without mpirun");
#endif
}

}  // namespace attnlab
