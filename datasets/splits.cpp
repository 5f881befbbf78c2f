#include "datasets/splits.h"

#include <algorithm>
#include <sstream>

#include "framework/error.h"

namespace attnlab {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Consecutive rejections after which the training stream gives up: the
// held-out set then covers nearly all of the probability mass, and training
// on what is left would be meaningless anyway.
constexpr int64_t kMaxConsecutiveRejections = 1000000;
}  // namespace

uint64_t derive_seed(uint64_t base, uint64_t stream) { return splitmix64(splitmix64(base) ^ stream); }

TaskConfig with_length(TaskConfig config, int64_t n) {
  if (n < 1) throw ValueError("evaluation length " + std::to_string(n) + " is invalid; expected >= 1");
  if (config.name == "add") {
    config.digits = n;
  } else {
    config.min_len = n;
    config.max_len = n;
  }
  return config;
}

size_t InputHash::operator()(const std::vector<int32_t>& ids) const {
  uint64_t h = ids.size();
  for (int32_t t : ids) h = splitmix64(h ^ static_cast<uint32_t>(t));
  return static_cast<size_t>(h);
}

HeldOut make_heldout(const Task& task, int64_t n, uint64_t seed) {
  if (n < 0) throw ValueError("held-out size " + std::to_string(n) + " is invalid; expected >= 0");
  HeldOut out;
  out.requested_ = n;
  const int64_t target = std::min(n, task.input_space_size());
  // Uniform over s inputs, collecting all of them takes about s ln s draws
  // (coupon collector), far below this bound.
  const int64_t max_draws = 100 * target + 100000;
  Rng rng(seed);
  out.examples_.reserve(static_cast<size_t>(target));
  int64_t draws = 0;
  while (out.size() < target) {
    if (draws++ >= max_draws)
      throw ValueError("held-out set: found only " + std::to_string(out.size()) + " distinct " + task.name() +
                       " inputs of the " + std::to_string(target) + " requested after " +
                       std::to_string(max_draws) + " draws; ask for fewer");
    Example ex = task.sample(rng);
    if (out.inputs_->insert(ex.input).second) out.examples_.push_back(std::move(ex));
  }
  return out;
}

TrainStream::TrainStream(const Task& task, const HeldOut& heldout, uint64_t seed)
    : task_(&task), heldout_(heldout.inputs()), rng_(seed) {
  if (heldout.size() >= task.input_space_size())
    throw ValueError("the held-out set holds all " + std::to_string(task.input_space_size()) + " possible " +
                     task.name() + " inputs, leaving none to train on; use a smaller held-out set or a larger "
                     "vocabulary / length range");
}

Example TrainStream::next() {
  for (int64_t rejections = 0;; ++rejections) {
    if (rejections >= kMaxConsecutiveRejections)
      throw ValueError("training stream: " + std::to_string(rejections) + " draws in a row were held-out " +
                       task_->name() + " inputs; the held-out set covers nearly every input, make it smaller");
    Example ex = task_->sample(rng_);
    if (heldout_->count(ex.input) == 0) {
      ++drawn_;
      return ex;
    }
    ++rejected_;
  }
}

std::vector<Example> TrainStream::next_batch(int64_t batch_size) {
  if (batch_size < 1) throw ValueError("batch size " + std::to_string(batch_size) + " is invalid; expected >= 1");
  std::vector<Example> batch;
  batch.reserve(static_cast<size_t>(batch_size));
  for (int64_t i = 0; i < batch_size; ++i) batch.push_back(next());
  return batch;
}

std::string TrainStream::state() const {
  return std::to_string(drawn_) + " " + std::to_string(rejected_) + " " + rng_.state();
}

void TrainStream::set_state(const std::string& s) {
  std::istringstream in(s);
  int64_t drawn = -1, rejected = -1;
  in >> drawn >> rejected;
  if (in.fail() || drawn < 0 || rejected < 0) throw ValueError("malformed training-stream state");
  std::string rest;
  std::getline(in, rest);
  rng_.set_state(rest);  // throws ValueError when malformed; counters stay untouched then
  drawn_ = drawn;
  rejected_ = rejected;
}

}  // namespace attnlab
