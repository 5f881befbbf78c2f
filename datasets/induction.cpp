// induction: the input is L distinct random symbols (L in [min_len, max_len])
// followed by one of them again, the cue; the output is the `span` symbols
// that followed the cue the first time: "continue the repeat". With distinct
// symbols the cue's earlier occurrence, and so the answer, is unique; a model
// solves it by attending from each token to the one after its previous
// occurrence (an induction head), not by position, since the cue's place is
// random (uniform over the places that leave `span` symbols after it).
//   "5 2 8 1 9 3 7 8" -> "1 9 3"   (span 3)
#include <algorithm>

#include "datasets/more_tasks.h"
#include "framework/error.h"

namespace attnlab {

namespace {

class InductionTask : public Task {
 public:
  explicit InductionTask(const TaskConfig& config) : Task(config, Vocab::numbered(config.vocab)) {
    const std::string k = std::to_string(config.span);
    if (config.min_len < config.span + 1)
      throw ValueError("induction: min_len = " + std::to_string(config.min_len) + " leaves no room for a cue followed by span = " +
                       k + " symbols; expected min_len >= span + 1 = " + std::to_string(config.span + 1));
    if (config.max_len > config.vocab)
      throw ValueError("induction: max_len = " + std::to_string(config.max_len) + " distinct symbols need vocab >= " +
                       std::to_string(config.max_len) + ", got vocab = " + std::to_string(config.vocab));
  }

  std::string name() const override { return "induction"; }
  std::string describe() const override {
    return "induction: L distinct random symbols then one of them again (the cue), output the " +
           std::to_string(config_.span) + " that followed it; " + std::to_string(config_.vocab) + " symbols, L = " +
           std::to_string(config_.min_len) + ".." + std::to_string(config_.max_len) + ", V = " + std::to_string(vocab_size());
  }

  std::vector<int32_t> sample_input(Rng& rng) const override {
    const int64_t L = rng.integer(config_.min_len, config_.max_len);
    std::vector<int32_t> input;
    input.reserve(static_cast<size_t>(L + 1));
    for (int64_t s : draw_distinct(rng, config_.vocab, L)) input.push_back(Vocab::symbol_id(s));
    input.push_back(input[static_cast<size_t>(rng.integer(0, L - 1 - config_.span))]);
    return input;
  }

  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    const auto k = static_cast<size_t>(config_.span);
    if (input.size() < k + 2)
      throw ValueError("induction: the input has " + std::to_string(input.size()) + " symbols; expected at least span + 2 = " +
                       std::to_string(k + 2) + " (a sequence and a cue)");
    for (int32_t t : input)
      if (t < kNumSpecial || t >= vocab_size())
        throw ValueError("induction: input id " + std::to_string(t) + " is not a task symbol");
    const std::vector<int32_t> seq(input.begin(), input.end() - 1);
    std::vector<int32_t> sorted = seq;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw ValueError("induction: the sequence before the cue repeats a symbol; expected distinct symbols");
    const int32_t cue = input.back();
    const auto at = std::find(seq.begin(), seq.end(), cue);
    if (at == seq.end()) throw ValueError("induction: the cue " + vocab_.token(cue) + " does not occur earlier in the input");
    const auto p = static_cast<size_t>(at - seq.begin());
    if (p + k >= seq.size())
      throw ValueError("induction: the cue " + vocab_.token(cue) + " is followed by only " + std::to_string(seq.size() - 1 - p) +
                       " symbols; span is " + std::to_string(k));
    return {seq.begin() + static_cast<int64_t>(p + 1), seq.begin() + static_cast<int64_t>(p + 1 + k)};
  }

  int64_t min_input_len() const override { return config_.min_len + 1; }
  int64_t max_input_len() const override { return config_.max_len + 1; }
  int64_t max_output_len() const override { return config_.span; }
  int64_t input_space_size() const override {  // sum over L of vocab!/(vocab-L)! x (L - span) cue places
    int64_t total = 0;
    for (int64_t L = config_.min_len; L <= config_.max_len; ++L)
      total = saturating_plus(total, saturating_times(saturating_permutations(config_.vocab, L), L - config_.span));
    return total;
  }
};

}  // namespace

std::unique_ptr<Task> make_induction_task(const TaskConfig& config) { return std::make_unique<InductionTask>(config); }

}  // namespace attnlab
