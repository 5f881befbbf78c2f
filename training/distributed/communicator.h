#pragma once
// The processes of a data-parallel run, behind the few collectives training
// needs: the Communicator. This base class is the one-process stand-in (rank 0
// of 1: every collective returns its input; one_process.cpp), so the library
// builds, runs and tests without MPI; mpi.cpp beside it is the MPI one (built
// when CMake finds MPI), and launch.h picks one for a command. The collectives
// are chosen for bitwise reproducibility: they only move data, and gradients
// are summed by the ranks themselves in a fixed order (ordered_sum.h), never
// reduced in an order the MPI library picks.
#include <cstdint>
#include <string>
#include <vector>

#include "framework/real.h"

namespace attnlab {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  bool is_root() const { return rank() == 0; }  // the rank that writes files and prints

  // Every rank's `local` (the same length on every rank), concatenated in rank order.
  virtual std::vector<Real> allgather(const std::vector<Real>& local) const { return local; }
  // Every rank's `local`, of counts[rank] elements, concatenated in rank order.
  virtual std::vector<Real> allgatherv(const std::vector<Real>& local, const std::vector<int64_t>& counts) const {
    (void)counts;
    return local;
  }
  // `send` holds send_counts[j] elements for rank j, in rank order; returns
  // recv_counts[i] elements from each rank i, in rank order.
  virtual std::vector<Real> alltoallv(const std::vector<Real>& send, const std::vector<int64_t>& send_counts,
                                      const std::vector<int64_t>& recv_counts) const {
    (void)send_counts, (void)recv_counts;
    return send;
  }
  virtual std::vector<double> allgather(const std::vector<double>& local) const { return local; }
  virtual std::vector<double> allgatherv(const std::vector<double>& local, const std::vector<int64_t>& counts) const {
    (void)counts;
    return local;
  }
  // True on every rank when it is true on any (collective stop decisions).
  virtual bool any(bool local) const { return local; }
  // The smallest of every rank's `local`, on every rank (exact: no rounding).
  virtual int min(int local) const { return local; }
  // Rank `from`'s `text`, on every rank (the others' `text` is ignored).
  virtual std::string broadcast(const std::string& text, int from) const { return text; }
  // Ends every process at once with exit code `code`, for a failure that the
  // other ranks cannot learn of (they may be waiting in a collective). The
  // stand-in returns: a single process unwinds as usual.
  virtual void abort(int code) const { (void)code; }

  // What this process sent to and received from the others, and the seconds
  // it spent in collectives, since it started (the stand-in: nothing).
  struct Traffic {
    uint64_t bytes_sent = 0, bytes_received = 0;
    double seconds = 0;
  };
  const Traffic& traffic() const { return traffic_; }

 protected:
  mutable Traffic traffic_;
};

// The stand-in, for callers that have no communicator of their own.
const Communicator& single_process();

}  // namespace attnlab
