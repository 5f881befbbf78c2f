// repeat: a language model over windows "r r", a random sequence r of L
// symbols (L in [min_len, max_len], each symbol uniform over `vocab`, with
// repetition) followed by the same L symbols again. Every position predicts
// the next token, as in the text task; the first copy is noise (its best loss
// is ln vocab), the repeat is predictable only from context: by attending from
// each token to the one after its earlier occurrence and copying it (an
// induction head, Olsson et al. 2022). The in-context loss compares the two.
//   r = "5 2 8 1": window "5 2 8 1 5 2 8 1", input "5 2 8 1 5 2 8",
//   output "2 8 1 5 2 8 1"
#include "datasets/more_tasks.h"
#include "datasets/sequence_task.h"
#include "framework/error.h"

namespace attnlab {

namespace {

class RepeatTask : public SequenceTask {
 public:
  explicit RepeatTask(const TaskConfig& config) : SequenceTask(config) {}

  std::string name() const override { return "repeat"; }
  std::string describe() const override {
    return "repeat: a language model over r r, L random symbols and the same L again (in-context copying); " +
           std::to_string(config_.vocab) + " symbols, L = " + std::to_string(config_.min_len) + ".." +
           std::to_string(config_.max_len) + ", windows of 2L tokens, V = " + std::to_string(vocab_size());
  }

  // The window r r: input = its first 2L - 1 tokens, output = its last 2L - 1.
  Example sample(Rng& rng) const override {
    const std::vector<int32_t> r = SequenceTask::sample_input(rng);
    std::vector<int32_t> window = r;
    window.insert(window.end(), r.begin(), r.end());
    return {{window.begin(), window.end() - 1}, {window.begin() + 1, window.end()}};
  }
  std::vector<int32_t> sample_input(Rng& rng) const override { return sample(rng).input; }

  // The input must be a window less its last token, r r[0..L-2]; its output is
  // the window less its first token.
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    check_input(input);
    const size_t n = input.size();
    if (n % 2 == 0)
      throw ValueError("repeat: the input has " + std::to_string(n) +
                       " symbols; expected 2L - 1 (a sequence of L and its repeat less the last symbol)");
    const size_t L = (n + 1) / 2;
    for (size_t i = L; i < n; ++i)
      if (input[i] != input[i - L])
        throw ValueError("repeat: input symbol " + std::to_string(i) + " differs from symbol " + std::to_string(i - L) +
                         "; expected the first " + std::to_string(L) + " symbols repeated");
    std::vector<int32_t> output(input.begin() + 1, input.end());
    output.push_back(input[L - 1]);
    return output;
  }

  int64_t min_input_len() const override { return 2 * config_.min_len - 1; }
  int64_t max_input_len() const override { return 2 * config_.max_len - 1; }
  int64_t max_output_len() const override { return max_input_len(); }
  bool outputs_fit_inputs() const override { return true; }
  bool language_model() const override { return true; }

  // Of the 2L - 1 targets, [0, L - 1) are the first copy's (unpredictable) and
  // [L, 2L - 1) the repeat after its first symbol (target L - 1, r[0], follows
  // the end of r and needs L, not an earlier occurrence: it is in neither).
  ContextSplit in_context_split(int64_t targets) const override {
    const int64_t L = (targets + 1) / 2;
    return {L - 1, L};
  }
};

}  // namespace

std::unique_ptr<Task> make_repeat_task(const TaskConfig& config) { return std::make_unique<RepeatTask>(config); }

}  // namespace attnlab
