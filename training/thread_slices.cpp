#include "training/thread_slices.h"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "framework/error.h"
#include "training/distributed/ordered_sum.h"

namespace attnlab {

void append_gradients(const std::vector<Var>& params, std::vector<Real>& out) {
  for (const Var& p : params) {
    if (p.has_grad()) out.insert(out.end(), p.grad().data(), p.grad().data() + p.numel());
    else out.insert(out.end(), static_cast<size_t>(p.numel()), Real(0));
  }
}

void set_gradients(const std::vector<Var>& params, const std::vector<Real>& flat) {
  size_t offset = 0;
  for (Var p : params) {
    if (!p.has_grad()) p.grad() = Tensor::uninitialized(p.shape());
    std::copy(flat.begin() + static_cast<std::ptrdiff_t>(offset),
              flat.begin() + static_cast<std::ptrdiff_t>(offset + static_cast<size_t>(p.numel())), p.grad().data());
    offset += static_cast<size_t>(p.numel());
  }
}

ThreadSlices::ThreadSlices(SequenceModel& model, int threads) : model_(model) {
  if (threads < 1) throw ValueError("thread slices need at least 1 thread, not " + std::to_string(threads));
  // The replicas' own initial values are overwritten before they compute anything.
  for (int t = 1; t < threads; ++t) replicas_.push_back(make_model(model.config(), 0));
}

void ThreadSlices::sync_replicas() {
  const std::vector<Var> source = model_.parameters();
  for (auto& replica : replicas_) {
    replica->train(model_.training());
    std::vector<Var> target = replica->parameters();
    for (size_t i = 0; i < source.size(); ++i)
      std::copy(source[i].value().data(), source[i].value().data() + source[i].numel(), target[i].value().data());
  }
}

void ThreadSlices::on_threads(int64_t count, const std::function<void(SequenceModel& model, int64_t t)>& work) {
  std::vector<std::exception_ptr> failed(static_cast<size_t>(count));
#pragma omp parallel num_threads(static_cast<int>(count))
  {
    // Micro-batch j on model j: with fewer threads than asked for (the runtime's
    // choice), a thread takes several, never one model at once with another.
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    omp_set_num_threads(1);  // this thread's ops (and oneDNN's products) stay on it
    for (int64_t j = t; j < count; j += team) {
      try {
        work(model_of(static_cast<int>(j)), j);
      } catch (...) {
        failed[static_cast<size_t>(j)] = std::current_exception();
      }
    }
  }
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

void ThreadSlices::sum_in_place(int64_t count, const std::function<void(SequenceModel& model, int64_t k)>& run) {
  if (count < 1 || count > threads())
    throw ValueError("sum_in_place takes 1 to " + std::to_string(threads()) + " micro-batches, not " + std::to_string(count));
  if (count == 1) return run(model_, 0);  // on the calling thread: its gradient is the sum
  sync_replicas();
  on_threads(count, run);
  // Each parameter's gradient, cut into pieces that the threads sum independently.
  struct Piece {
    std::vector<const Real*> leaves;  // a null leaf: that model has no gradient for the parameter
    Real* out;
    int64_t n;
  };
  constexpr int64_t kPiece = 16384;
  std::vector<Piece> pieces;
  std::vector<std::vector<Var>> params;
  for (int64_t t = 0; t < count; ++t) params.push_back(model_of(static_cast<int>(t)).parameters());
  for (size_t i = 0; i < params[0].size(); ++i) {
    bool any = false;
    for (const auto& p : params) any = any || p[i].has_grad();
    if (!any) continue;
    Var target = params[0][i];
    if (!target.has_grad()) {
      target.grad() = Tensor::uninitialized(target.shape());
      target.grad().zero_();
    }
    for (int64_t at = 0; at < target.numel(); at += kPiece) {
      Piece piece{{}, target.grad().data() + at, std::min(kPiece, target.numel() - at)};
      for (const auto& p : params) piece.leaves.push_back(p[i].has_grad() ? p[i].grad().data() + at : nullptr);
      pieces.push_back(std::move(piece));
    }
  }
  const int64_t n = static_cast<int64_t>(pieces.size());
#pragma omp parallel for schedule(static) num_threads(threads()) if (n > 1)
  for (int64_t j = 0; j < n; ++j) tree_sum(pieces[static_cast<size_t>(j)].leaves, pieces[static_cast<size_t>(j)].out,
                                           pieces[static_cast<size_t>(j)].n);
}

std::function<std::vector<Real>(int64_t)> ThreadSlices::ordered_leaves(int64_t begin, int64_t end, Leaf leaf) {
  if (replicas_.empty()) return [this, leaf](int64_t k) { return leaf(model_, k); };
  sync_replicas();
  struct Block {
    int64_t start = -1;                    // the first micro-batch of the block computed last
    std::vector<std::vector<Real>> leaves;  // its leaves, by thread
  };
  auto block = std::make_shared<Block>();
  const int64_t T = threads();
  return [this, block, leaf, begin, end, T](int64_t k) {
    const int64_t start = begin + (k - begin) / T * T;
    if (block->start != start) {
      const int64_t n = std::min(T, end - start);
      block->start = start;
      block->leaves.assign(static_cast<size_t>(n), {});
      on_threads(n, [&](SequenceModel& on, int64_t j) { block->leaves[static_cast<size_t>(j)] = leaf(on, start + j); });
    }
    return std::move(block->leaves[static_cast<size_t>(k - start)]);
  };
}

}  // namespace attnlab
