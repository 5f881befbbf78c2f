#include "datasets/train_set.h"

#include <numeric>
#include <sstream>
#include <utility>

#include "framework/error.h"

namespace attnlab {

TrainSet::TrainSet(std::vector<Example> examples, uint64_t order_seed, bool shuffle)
    : examples_(std::move(examples)), order_seed_(order_seed), shuffle_(shuffle) {
  if (examples_.empty()) throw ValueError("a training set needs at least one example");
}

int64_t TrainSet::index_at(int64_t epoch, int64_t position) {
  if (!shuffle_) return position;
  if (epoch != order_epoch_) {
    order_.resize(examples_.size());
    std::iota(order_.begin(), order_.end(), int64_t{0});
    Rng rng(derive_seed(order_seed_, static_cast<uint64_t>(epoch)));
    for (int64_t i = size() - 1; i > 0; --i) std::swap(order_[static_cast<size_t>(i)], order_[static_cast<size_t>(rng.integer(0, i))]);
    order_epoch_ = epoch;
  }
  return order_[static_cast<size_t>(position)];
}

std::vector<Example> TrainSet::next_batch(int64_t batch_size) {
  if (batch_size < 1) throw ValueError("batch size " + std::to_string(batch_size) + " is invalid; expected >= 1");
  std::vector<Example> batch;
  batch.reserve(static_cast<size_t>(batch_size));
  for (int64_t i = 0; i < batch_size; ++i, ++taken_)
    batch.push_back(examples_[static_cast<size_t>(index_at(taken_ / size(), taken_ % size()))]);
  return batch;
}

std::string TrainSet::state() const { return "set " + std::to_string(taken_); }

void TrainSet::set_state(const std::string& s) {
  std::istringstream in(s);
  std::string word, rest;
  int64_t taken = -1;
  in >> word >> taken;
  if (in.fail() || word != "set" || taken < 0 || (in >> rest)) throw ValueError("malformed training-set state");
  taken_ = taken;
}

std::vector<Example> draw_distinct(TrainStream& stream, int64_t n, const std::string& task_name) {
  if (n < 1) throw ValueError("training set size " + std::to_string(n) + " is invalid; expected >= 1");
  const int64_t max_draws = 100 * n + 100000;  // as make_heldout's: far above the coupon collector's s ln s
  InputSet seen;
  std::vector<Example> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t draws = 0; static_cast<int64_t>(out.size()) < n; ++draws) {
    if (draws >= max_draws)
      throw ValueError("training set: found only " + std::to_string(out.size()) + " distinct " + task_name +
                       " inputs of the " + std::to_string(n) + " requested after " + std::to_string(max_draws) +
                       " draws; ask for fewer");
    Example ex = stream.next();
    if (seen.insert(ex.input).second) out.push_back(std::move(ex));
  }
  return out;
}

}  // namespace attnlab
