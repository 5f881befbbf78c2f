// recall (associative recall): the input is n key-value pairs (n in
// [min_len, max_len]) followed by one of the keys again, the query; the output
// is the query key and then its value. Keys are the first half of the symbols
// (0..K-1 with K = vocab / 2), distinct within an input; values are the other
// half, drawn independently (they may repeat). A model must find the query's
// earlier occurrence and copy the token after it.
//   vocab 10: "3 7 0 5 4 9 0" -> "0 5"
//
// Why the key is repeated: a decoder predicts the first output token at
// [sep], which only knows the query through the token before it; answering
// there takes a previous-token hop on both the query and the key side, which
// a 2-layer decoder did not find in 8000 steps (held-out exact match stayed
// at chance level, about 30%). With the key echoed, the value is predicted at
// the query token itself, as in multi-query associative recall (Arora et al.,
// Zoology, 2023): one induction step, learnt like the induction task.
#include <algorithm>

#include "datasets/more_tasks.h"
#include "framework/error.h"

namespace attnlab {

namespace {

class RecallTask : public Task {
 public:
  explicit RecallTask(const TaskConfig& config)
      : Task(config, Vocab::numbered(config.vocab)), keys_(config.vocab / 2), values_(config.vocab - config.vocab / 2) {
    if (config.max_len > keys_)
      throw ValueError("recall: max_len = " + std::to_string(config.max_len) + " pairs need as many distinct keys, but vocab = " +
                       std::to_string(config.vocab) + " gives " + std::to_string(keys_) + " (half the symbols are keys); " +
                       "expected vocab >= " + std::to_string(2 * config.max_len));
  }

  std::string name() const override { return "recall"; }
  std::string describe() const override {
    return "recall: n key-value pairs then a query key, output the key and its value; keys 0.." + std::to_string(keys_ - 1) +
           " (distinct), values " + std::to_string(keys_) + ".." + std::to_string(config_.vocab - 1) + ", n = " +
           std::to_string(config_.min_len) + ".." + std::to_string(config_.max_len) + ", V = " + std::to_string(vocab_size());
  }

  std::vector<int32_t> sample_input(Rng& rng) const override {
    const int64_t n = rng.integer(config_.min_len, config_.max_len);
    std::vector<int32_t> input;
    input.reserve(static_cast<size_t>(2 * n + 1));
    for (int64_t key : draw_distinct(rng, keys_, n)) {
      input.push_back(Vocab::symbol_id(key));
      input.push_back(Vocab::symbol_id(keys_ + rng.integer(0, values_ - 1)));
    }
    input.push_back(input[static_cast<size_t>(2 * rng.integer(0, n - 1))]);
    return input;
  }

  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    if (input.size() < 3 || input.size() % 2 == 0)
      throw ValueError("recall: the input has " + std::to_string(input.size()) +
                       " symbols; expected key-value pairs and a query (an odd number, at least 3)");
    auto is_key = [&](int32_t t) { return t >= kNumSpecial && t < Vocab::symbol_id(keys_); };
    auto is_value = [&](int32_t t) { return t >= Vocab::symbol_id(keys_) && t < vocab_size(); };
    std::vector<int32_t> keys;
    for (size_t i = 0; i + 1 < input.size(); i += 2) {
      if (!is_key(input[i]) || !is_value(input[i + 1]))
        throw ValueError("recall: pair " + std::to_string(i / 2) + " is not a key (0.." + std::to_string(keys_ - 1) +
                         ") followed by a value (" + std::to_string(keys_) + ".." + std::to_string(config_.vocab - 1) + ")");
      if (std::find(keys.begin(), keys.end(), input[i]) != keys.end())
        throw ValueError("recall: key " + vocab_.token(input[i]) + " appears twice; expected distinct keys");
      keys.push_back(input[i]);
    }
    const auto at = std::find(keys.begin(), keys.end(), input.back());
    if (at == keys.end()) throw ValueError("recall: the query " + safe_token(input.back()) + " is not one of the keys");
    return {input.back(), input[2 * static_cast<size_t>(at - keys.begin()) + 1]};
  }

  int64_t min_input_len() const override { return 2 * config_.min_len + 1; }
  int64_t max_input_len() const override { return 2 * config_.max_len + 1; }
  int64_t max_output_len() const override { return 2; }
  int64_t input_space_size() const override {  // sum over n of K!/(K-n)! x values^n x n queries
    int64_t total = 0;
    for (int64_t n = config_.min_len; n <= config_.max_len; ++n) {
      int64_t count = saturating_times(saturating_permutations(keys_, n), n);
      for (int64_t i = 0; i < n; ++i) count = saturating_times(count, values_);
      total = saturating_plus(total, count);
    }
    return total;
  }

 private:
  std::string safe_token(int32_t t) const { return t >= 0 && t < vocab_size() ? vocab_.token(t) : "id " + std::to_string(t); }

  int64_t keys_, values_;
};

}  // namespace

std::unique_ptr<Task> make_recall_task(const TaskConfig& config) { return std::make_unique<RecallTask>(config); }

}  // namespace attnlab
