// The MPI communicator (built when CMake finds MPI): MPI_COMM_WORLD, whose
// ranks are the processes `mpirun -np N` started.
#include <mpi.h>

#include <memory>
#include <string>

#include "framework/error.h"
#include "training/distributed/communicator.h"

namespace attnlab {

namespace {

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) MPI_Init(nullptr, nullptr);
    // Errors end the job (the default), so a rank that dies takes the others with it.
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<Real> allgather(const std::vector<Real>& local) const override {
    return gather(local, sizeof(Real) == 4 ? MPI_FLOAT : MPI_DOUBLE);
  }
  std::vector<double> allgather(const std::vector<double>& local) const override { return gather(local, MPI_DOUBLE); }
  bool any(bool local) const override {
    int in = local, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    return out != 0;
  }
  int min(int local) const override {
    int out = local;
    MPI_Allreduce(&local, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out;
  }
  std::string broadcast(const std::string& text, int from) const override {
    unsigned long long length = text.size();
    MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, from, MPI_COMM_WORLD);
    std::string out = rank_ == from ? text : std::string(static_cast<size_t>(length), '\0');
    MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, from, MPI_COMM_WORLD);
    return out;
  }
  void abort(int code) const override { MPI_Abort(MPI_COMM_WORLD, code); }

 private:
  template <class T>
  std::vector<T> gather(const std::vector<T>& local, MPI_Datatype type) const {
    std::vector<T> out(local.size() * static_cast<size_t>(size_));
    MPI_Allgather(local.data(), static_cast<int>(local.size()), type, out.data(), static_cast<int>(local.size()), type,
                  MPI_COMM_WORLD);
    return out;
  }

  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace attnlab
