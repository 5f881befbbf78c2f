// text: a character-level language model over a text file (decoder only).
//
// Every UTF-8 character is a token (spaces and newlines included); the
// vocabulary is the file's characters in order of first appearance, or a
// run's vocab.txt. The last heldout_fraction of the file is held out; training
// draws windows of seq_len + 1 characters uniformly from the rest, as the
// example (window[:-1], window[1:]): every position predicts the next
// character. The held-out examples cover the tail in consecutive windows, so
// that each held-out character is predicted exactly once (the first one from
// the last training character); their mean loss / ln 2 is bits per character.
#include <cmath>
#include <map>
#include <sstream>

#include "datasets/data_file.h"
#include "datasets/more_tasks.h"
#include "framework/error.h"

namespace attnlab {

namespace {

class TextTask : public Task {
 public:
  TextTask(const TaskConfig& config, TokenTable table, std::vector<int32_t> tokens, std::string missing)
      : Task(config, Vocab::numbered(std::max<int64_t>(1, table.size() - kNumSpecial))),
        table_(std::move(table)), tokens_(std::move(tokens)), missing_(std::move(missing)) {
    if (!missing_.empty()) return;
    const auto n = static_cast<int64_t>(tokens_.size());
    const int64_t held = std::max<int64_t>(1, static_cast<int64_t>(std::floor(config.heldout_fraction * static_cast<double>(n))));
    train_len_ = n - held;
    const int64_t T = config.seq_len;
    if (train_len_ < T + 1)
      throw ValueError(config.file + ": " + std::to_string(n) + " characters leave " + std::to_string(train_len_) +
                       " for training after holding out the last " + std::to_string(held) + ", fewer than one window of " +
                       "seq_len + 1 = " + std::to_string(T + 1) + "; use a smaller --seq-len or a longer file");
    for (int64_t start = train_len_ - 1; start + 1 < n; start += T) {
      const int64_t end = std::min(n - 1, start + T);  // inputs [start, end), targets [start + 1, end + 1)
      heldout_.push_back({{tokens_.begin() + start, tokens_.begin() + end}, {tokens_.begin() + start + 1, tokens_.begin() + end + 1}});
    }
    std::map<int32_t, int64_t> counts;
    for (int32_t t : tokens_) ++counts[t];
    for (const auto& [t, c] : counts) {
      const double p = static_cast<double>(c) / static_cast<double>(n);
      entropy_ -= p * std::log2(p);
    }
  }

  std::string name() const override { return "text"; }
  std::string describe() const override {
    if (!missing_.empty()) return "text: " + missing_;
    std::ostringstream out;
    out.precision(3);
    out << std::fixed << "text: character-level language model over " << config_.file << ", " << tokens_.size()
        << " characters, " << vocab_size() - kNumSpecial << " distinct (V = " << vocab_size() << "), unigram entropy "
        << entropy_ << " bits/char; windows of " << config_.seq_len << "; held out: the last "
        << tokens_.size() - static_cast<size_t>(train_len_) << " characters";
    return out.str();
  }

  Example sample(Rng& rng) const override {
    require_data();
    const int64_t T = config_.seq_len;
    const int64_t start = rng.integer(0, train_len_ - T - 1);
    const auto first = tokens_.begin() + start;
    return {{first, first + T}, {first + 1, first + T + 1}};
  }
  std::vector<int32_t> sample_input(Rng& rng) const override { return sample(rng).input; }
  std::vector<int32_t> solve(const std::vector<int32_t>&) const override {
    throw ValueError("text: a language model has no single correct output for an input; use attnlab sample");
  }

  int64_t min_input_len() const override { return config_.seq_len; }
  int64_t max_input_len() const override { return config_.seq_len; }
  int64_t max_output_len() const override { return config_.seq_len; }
  int64_t input_space_size() const override { return std::max<int64_t>(0, train_len_ - config_.seq_len); }

  std::string to_text(const std::vector<int32_t>& ids) const override { return table_.decode(ids); }
  std::vector<int32_t> from_text(const std::string& text) const override { return table_.encode(text); }
  std::string token_text(int32_t id) const override { return table_.token(id); }
  // Empty (never null) when the file is gone: callers may ask whether the task is a file task.
  const std::vector<Example>* own_heldout() const override { return &heldout_; }
  bool language_model() const override { return true; }
  std::string token_unit() const override { return "character"; }
  std::pair<std::vector<int32_t>, std::vector<int32_t>> text_split() const override {
    const auto cut = tokens_.begin() + train_len_;
    return {{tokens_.begin(), cut}, {cut, tokens_.end()}};
  }
  std::string saved_vocab() const override { return table_.serialize(); }
  std::string longest_source() const override { return "--seq-len " + std::to_string(config_.seq_len); }

 private:
  void require_data() const {
    if (!missing_.empty()) throw IoError("text: " + missing_);
  }

  TokenTable table_;
  std::vector<int32_t> tokens_;  // the whole file
  int64_t train_len_ = 0;        // tokens_[0, train_len_) is trained on, the rest held out
  std::vector<Example> heldout_;
  double entropy_ = 0;  // of the character frequencies of the whole file, bits
  std::string missing_;  // why the file could not be read (a loaded run whose file is gone); empty when read
};

}  // namespace

std::unique_ptr<Task> make_text_task(const TaskConfig& config) {
  TokenTable table = initial_table(config, TokenTable::Mode::chars);
  const bool saved = !config.vocab_path.empty();
  std::string text;
  try {
    text = read_data_file(config.file);
  } catch (const IoError& e) {
    // A trained run keeps its vocabulary: sampling still works without the file.
    if (!saved) throw;
    return std::make_unique<TextTask>(config, std::move(table), std::vector<int32_t>{},
                                      std::string(e.what()) + " (the run's vocabulary is in " + config.vocab_path + ")");
  }
  std::vector<int32_t> tokens;
  int64_t line = 1;
  for (const std::string& ch : table.split(text)) {
    auto id = saved ? table.find(ch) : std::optional<int32_t>(table.add(ch));
    if (!id)
      throw ValueError(file_line(config.file, line) + "character " + TokenTable::quoted(ch) +
                       " is not in the run's vocabulary " + config.vocab_path);
    tokens.push_back(*id);
    line += ch == "\n";
  }
  return std::make_unique<TextTask>(config, std::move(table), std::move(tokens), "");
}

}  // namespace attnlab
