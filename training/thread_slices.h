#pragma once
// A process's threads as data-parallel workers inside one step. With T
// threads a step's micro-batches are computed T at a time: micro-batch j of a
// block on thread j, with its own replica of the model (thread 0: the model
// itself) and single-threaded ops. A small model gains little when each op is
// split across threads (an op on a (512, 64) tensor is over before a second
// thread has started, and the step has hundreds of them); whole micro-batches
// per thread fork and join once per block.
//
// A micro-batch's gradient does not depend on the thread that computed it, so
// T threads of K micro-batches give the bits of one thread of K·T (and of T
// processes of K: training/distributed/ordered_sum.h sums them in one fixed
// order). The replicas' parameter values are copied from the model before
// every block; their gradients are theirs alone.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "framework/real.h"
#include "models/sequence_model.h"

namespace attnlab {

// Appends the gradients of every parameter to `out`, one after the other
// (zeros where a parameter has none): a micro-batch's leaf.
void append_gradients(const std::vector<Var>& params, std::vector<Real>& out);
// Sets every parameter's gradient from `flat`, the parameters' gradients one after the other.
void set_gradients(const std::vector<Var>& params, const std::vector<Real>& flat);

class ThreadSlices {
 public:
  // Micro-batch k's gradient (the parameters' gradients one after the other),
  // computed on `model`, which is the thread's own.
  using Leaf = std::function<std::vector<Real>(SequenceModel& model, int64_t k)>;

  // `threads` workers for `model` (which must outlive this); 1: no replica,
  // every leaf runs on the calling thread with its thread count.
  ThreadSlices(SequenceModel& model, int threads);

  int threads() const { return static_cast<int>(replicas_.size()) + 1; }

  // One micro-batch per thread, summed in place: run(model of thread t, t)
  // for t < count <= threads() leaves micro-batch t's gradient in that
  // model's parameters' gradients; the model's then hold their sum over
  // ordered_sum.h's tree (tree_sum: the bits of local_partial_sums over
  // `count` micro-batches), with no copy of a whole gradient in between.
  // count 1: run(model, 0) on the calling thread, its ops on its threads.
  void sum_in_place(int64_t count, const std::function<void(SequenceModel& model, int64_t k)>& run);

  // For training/distributed/ordered_sum.h's local_partial_sums over
  // micro-batches [begin, end): a function that, asked for k = begin, begin+1,
  // ... in order, returns leaf(·, k); the first request of each block of T
  // computes the block's leaves at once, one per thread. An exception thrown
  // by a leaf reaches the caller (the first thread's, if several throw).
  std::function<std::vector<Real>(int64_t)> ordered_leaves(int64_t begin, int64_t end, Leaf leaf);

 private:
  // Copies the model's parameter values and train/eval mode into every replica.
  void sync_replicas();
  // Runs work(model of thread t, t) for t < count on `count` threads, one
  // thread each for their ops; rethrows the first thread's exception.
  void on_threads(int64_t count, const std::function<void(SequenceModel& model, int64_t t)>& work);
  SequenceModel& model_of(int thread) { return thread == 0 ? model_ : *replicas_[static_cast<size_t>(thread - 1)]; }

  SequenceModel& model_;
  std::vector<std::unique_ptr<SequenceModel>> replicas_;
};

}  // namespace attnlab
