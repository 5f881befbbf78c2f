// A task of your own, trained with the library's Trainer: histogram (Weiss et
// al., "Thinking Like Transformers"): each output position says how often its
// input symbol occurs in the whole input, "0 2 0 1" -> "2 1 2 1". Exits 0 only
// if held-out exact match reaches 90%.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "framework/error.h"
#include "training/trainer.h"

using namespace attnlab;

class HistogramTask : public Task {
 public:
  // Inputs of config.max_len symbols out of config.vocab; counts 1..max_len
  // are spelt with the same numbered symbols, so there are enough of them for both.
  explicit HistogramTask(const TaskConfig& c) : Task(c, Vocab::numbered(std::max(c.vocab, c.max_len + 1))) {}

  std::string name() const override { return "histogram"; }
  std::string describe() const override { return "output[i] = occurrences of input[i] in the input"; }
  std::vector<int32_t> sample_input(Rng& rng) const override {
    std::vector<int32_t> input(config_.max_len);
    for (int32_t& t : input) t = Vocab::symbol_id(rng.integer(0, config_.vocab - 1));
    return input;
  }
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    if (input.empty() || static_cast<int64_t>(input.size()) > config_.max_len)
      throw ValueError("histogram: inputs have 1 to " + std::to_string(config_.max_len) + " symbols, got " +
                       std::to_string(input.size()));
    std::vector<int32_t> output;
    for (int32_t t : input) {
      if (t < Vocab::symbol_id(0) || t >= Vocab::symbol_id(config_.vocab))
        throw ValueError("histogram: not an input symbol: id " + std::to_string(t));
      output.push_back(Vocab::symbol_id(std::count(input.begin(), input.end(), t)));
    }
    return output;
  }
  int64_t min_input_len() const override { return config_.max_len; }
  int64_t max_input_len() const override { return config_.max_len; }
  int64_t max_output_len() const override { return config_.max_len; }
  int64_t input_space_size() const override {  // vocab^len, saturating
    int64_t n = 1;
    for (int64_t i = 0; i < config_.max_len && n < INT64_MAX / config_.vocab; ++i) n *= config_.vocab;
    return n;
  }
};

int main() {
  TrainSettings s = default_settings();  // an encoder tagger: one output per input position
  s.task.name = "histogram";
  s.task.vocab = 4;
  s.task.min_len = s.task.max_len = 8;
  s.model.d_model = 32;
  s.model.n_heads = 2;
  s.model.d_ff = 64;
  s.steps = 1500;  // seeds 0-7 reach the target by 200-800 steps; 600 was too few for some
  s.eval_every = 100;
  s.heldout = 200;
  s.target = 0.95;  // stop early once held-out exact match reaches 95%
  s.optim.lr = 3e-3;
  auto task = std::make_unique<HistogramTask>(s.task);
  finalize(s, *task);
  TrainState state(s, std::move(task));
  TrainOutcome out = Trainer(state, {}).run();

  // Evaluate: greedy answers on the held-out inputs, which training never saw.
  std::vector<std::vector<int32_t>> answers;
  Accuracy acc = greedy_accuracy(state.model(), state.heldout(), 256, &answers);
  for (size_t i = 0; i < 3; ++i)
    std::printf("%s   model: %s\n", example_text(state.task(), state.heldout()[i]).c_str(),
                state.task().to_text(answers[i]).c_str());
  std::printf("%lld steps, held-out exact match %.3f over %lld inputs (needs >= 0.900)\n",
              static_cast<long long>(out.last_step), acc.exact, static_cast<long long>(acc.sequences));
  return out.end == TrainEnd::finished && acc.exact >= 0.9 ? 0 : 1;
}
