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
  std::vector<Real> allgather(const std::vector<Real>& local) const override { return gather(local, real_type()); }
  std::vector<Real> allgatherv(const std::vector<Real>& local, const std::vector<int64_t>& counts) const override {
    return gatherv(local, counts, real_type());
  }
  std::vector<double> allgatherv(const std::vector<double>& local, const std::vector<int64_t>& counts) const override {
    return gatherv(local, counts, MPI_DOUBLE);
  }
  std::vector<Real> alltoallv(const std::vector<Real>& send, const std::vector<int64_t>& send_counts,
                              const std::vector<int64_t>& recv_counts) const override {
    const Timer timer(traffic_);
    const std::vector<int> sn = ints(send_counts), rn = ints(recv_counts), sat = offsets(sn), rat = offsets(rn);
    std::vector<Real> out(static_cast<size_t>(rat.back() + rn.back()));
    MPI_Alltoallv(send.data(), sn.data(), sat.data(), real_type(), out.data(), rn.data(), rat.data(), real_type(), MPI_COMM_WORLD);
    const size_t me = static_cast<size_t>(rank_);
    count(total(sn) - sn[me], total(rn) - rn[me]);
    return out;
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
  static MPI_Datatype real_type() { return sizeof(Real) == 4 ? MPI_FLOAT : MPI_DOUBLE; }

  // Adds the seconds of one collective to the traffic on leaving.
  struct Timer {
    explicit Timer(Traffic& t) : traffic(t), start(MPI_Wtime()) {}
    ~Timer() { traffic.seconds += MPI_Wtime() - start; }
    Traffic& traffic;
    double start;
  };

  // Elements sent and received, as bytes of T.
  template <class T = Real>
  void count(int64_t sent, int64_t received) const {
    traffic_.bytes_sent += static_cast<uint64_t>(sent) * sizeof(T);
    traffic_.bytes_received += static_cast<uint64_t>(received) * sizeof(T);
  }
  static std::vector<int> ints(const std::vector<int64_t>& counts) { return {counts.begin(), counts.end()}; }
  static std::vector<int> offsets(const std::vector<int>& n) {
    std::vector<int> at(n.size(), 0);
    for (size_t i = 1; i < n.size(); ++i) at[i] = at[i - 1] + n[i - 1];
    return at;
  }
  static int64_t total(const std::vector<int>& n) {
    int64_t sum = 0;
    for (int v : n) sum += v;
    return sum;
  }

  template <class T>
  std::vector<T> gatherv(const std::vector<T>& local, const std::vector<int64_t>& counts, MPI_Datatype type) const {
    const Timer timer(traffic_);
    const std::vector<int> n = ints(counts), at = offsets(n);
    std::vector<T> out(static_cast<size_t>(at.back() + n.back()));
    MPI_Allgatherv(local.data(), n[static_cast<size_t>(rank_)], type, out.data(), n.data(), at.data(), type, MPI_COMM_WORLD);
    count<T>(n[static_cast<size_t>(rank_)] * (size_ - 1), total(n) - n[static_cast<size_t>(rank_)]);
    return out;
  }

  template <class T>
  std::vector<T> gather(const std::vector<T>& local, MPI_Datatype type) const {
    const Timer timer(traffic_);
    const int64_t n = static_cast<int64_t>(local.size());
    traffic_.bytes_sent += static_cast<uint64_t>(n * (size_ - 1)) * sizeof(T);
    traffic_.bytes_received += static_cast<uint64_t>(n * (size_ - 1)) * sizeof(T);
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
