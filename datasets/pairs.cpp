// pairs: examples read from a file of `input<TAB>output` lines, tokens
// separated by whitespace (tokenize = words) or every character a token
// (tokenize = chars). Blank lines are skipped; a line repeated verbatim counts
// once; one input with two different outputs is an error, since no model can
// answer both.
//
// Held-out split: with heldout_file, its pairs (every input of it is then
// left out of training); otherwise round(heldout_fraction x distinct inputs)
// of them chosen by Rng(derive_seed(seed, kHeldoutStream)), so the same seed
// gives the same split. sample() draws a training pair uniformly, so held-out
// inputs never occur in training by construction.
//
// The vocabulary is built from the training file in order of first appearance
// (or read from a run's vocab.txt); a held-out token missing from it is an
// error naming the file and line.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "datasets/data_file.h"
#include "datasets/more_tasks.h"
#include "datasets/splits.h"
#include "framework/error.h"

namespace attnlab {

namespace {

struct Pair {
  std::vector<int32_t> input, output;
  int64_t line = 0;
};

// The distinct pairs of `path` in file order. With `grow`, new tokens join the
// table; otherwise an unknown token is an error that says whose vocabulary
// lacks it.
std::vector<Pair> read_pairs(const std::string& path, TokenTable& table, bool grow, const std::string& vocab_source) {
  const std::vector<std::string> lines = split_lines(read_data_file(path));
  std::vector<Pair> pairs;
  std::unordered_map<std::vector<int32_t>, size_t, InputHash> seen;  // input -> index in pairs
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const auto number = static_cast<int64_t>(i) + 1;
    if (std::all_of(line.begin(), line.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }))
      continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos)
      throw ValueError(file_line(path, number) + "no tab between input and output (expected input<TAB>output): " +
                       TokenTable::quoted(line));
    if (line.find('\t', tab + 1) != std::string::npos)
      throw ValueError(file_line(path, number) + "more than one tab (expected input<TAB>output)");
    Pair p;
    p.line = number;
    for (int side = 0; side < 2; ++side) {
      const std::string text = side == 0 ? line.substr(0, tab) : line.substr(tab + 1);
      std::vector<int32_t>& ids = side == 0 ? p.input : p.output;
      for (const std::string& token : table.split(text)) {
        std::optional<int32_t> id = grow ? std::optional<int32_t>(table.add(token)) : table.find(token);
        if (!id)
          throw ValueError(file_line(path, number) + "token " + TokenTable::quoted(token) + " is not in " + vocab_source);
        if (*id < kNumSpecial)
          throw ValueError(file_line(path, number) + "the token " + token + " is reserved for the models' special tokens");
        ids.push_back(*id);
      }
      if (ids.empty()) throw ValueError(file_line(path, number) + (side == 0 ? "the input is empty" : "the output is empty"));
    }
    auto [it, fresh] = seen.emplace(p.input, pairs.size());
    if (!fresh) {
      const Pair& first = pairs[it->second];
      if (first.output != p.output)
        throw ValueError(file_line(path, number) + "this input already appeared on line " + std::to_string(first.line) +
                         " with a different output");
      continue;
    }
    pairs.push_back(std::move(p));
  }
  if (pairs.empty()) throw ValueError(path + ": no input<TAB>output lines (the file holds only blank lines)");
  return pairs;
}

class PairsTask : public Task {
 public:
  PairsTask(const TaskConfig& config, TokenTable table, std::vector<Pair> train, std::vector<Pair> heldout,
            int64_t dropped, std::string missing)
      : Task(config, Vocab::numbered(std::max<int64_t>(1, table.size() - kNumSpecial))),
        table_(std::move(table)), dropped_(dropped), missing_(std::move(missing)) {
    auto take = [&](std::vector<Pair>& from, std::vector<Example>& to, const std::string& path) {
      for (Pair& p : from) {
        const auto in = static_cast<int64_t>(p.input.size()), out = static_cast<int64_t>(p.output.size());
        const std::string where = path + " line " + std::to_string(p.line);
        if (in > max_in_) max_in_ = in, longest_in_ = where;
        if (out > max_out_) max_out_ = out, longest_out_ = where;
        min_in_ = min_in_ == 0 ? in : std::min(min_in_, in);
        fit_ = fit_ && out <= in;
        answers_[p.input] = p.output;
        to.push_back({std::move(p.input), std::move(p.output)});
      }
    };
    take(train, train_, config.file);
    take(heldout, heldout_, config.heldout_file.empty() ? config.file : config.heldout_file);
  }

  std::string name() const override { return "pairs"; }
  std::string describe() const override {
    if (!missing_.empty()) return "pairs: " + missing_;
    const TaskConfig& c = config_;
    std::string held = c.heldout_file.empty()
                           ? "a fraction " + str(c.heldout_fraction) + " of the distinct inputs (seed " + std::to_string(c.seed) + ")"
                           : c.heldout_file + (dropped_ ? " (" + std::to_string(dropped_) + " of its inputs left out of training)" : "");
    return "pairs: " + std::to_string(train_.size()) + " training pairs from " + c.file + " (" +
           (table_.mode() == TokenTable::Mode::words ? "words" : "characters") + "), inputs " + std::to_string(min_in_) +
           ".." + std::to_string(max_in_) + " tokens, outputs up to " + std::to_string(max_out_) + ", V = " +
           std::to_string(vocab_size()) + "; held out: " + std::to_string(heldout_.size()) + " pairs, " + held;
  }

  Example sample(Rng& rng) const override {
    require_data();
    return train_[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(train_.size()) - 1))];
  }
  std::vector<int32_t> sample_input(Rng& rng) const override { return sample(rng).input; }
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    if (!missing_.empty()) throw ValueError("pairs: " + missing_ + ", so the expected output is unknown");
    auto it = answers_.find(input);
    if (it == answers_.end())
      throw ValueError("pairs: the input " + TokenTable::quoted(to_text(input)) + " is not in " + config_.file +
                       (config_.heldout_file.empty() ? "" : " or " + config_.heldout_file));
    return it->second;
  }

  int64_t min_input_len() const override { return std::max<int64_t>(1, min_in_); }
  int64_t max_input_len() const override { return max_in_; }
  int64_t max_output_len() const override { return max_out_; }
  int64_t input_space_size() const override { return static_cast<int64_t>(train_.size()); }

  std::string to_text(const std::vector<int32_t>& ids) const override { return table_.decode(ids); }
  std::vector<int32_t> from_text(const std::string& text) const override { return table_.encode(text); }
  std::string token_text(int32_t id) const override { return table_.token(id); }
  // Empty (never null) when the file is gone: callers may ask whether the task is a file task.
  const std::vector<Example>* own_heldout() const override { return &heldout_; }
  bool outputs_fit_inputs() const override { return fit_; }
  std::string saved_vocab() const override { return table_.serialize(); }
  std::string longest_source() const override {
    return "longest input: " + longest_in_ + " (" + std::to_string(max_in_) + " tokens), longest output: " + longest_out_ +
           " (" + std::to_string(max_out_) + " tokens)";
  }

 private:
  static std::string str(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  }
  void require_data() const {
    if (!missing_.empty()) throw IoError("pairs: " + missing_);
  }

  TokenTable table_;
  std::vector<Example> train_, heldout_;
  std::unordered_map<std::vector<int32_t>, std::vector<int32_t>, InputHash> answers_;
  int64_t min_in_ = 0, max_in_ = 0, max_out_ = 0, dropped_ = 0;
  std::string longest_in_, longest_out_;
  bool fit_ = true;
  std::string missing_;  // why the data could not be read (a loaded run whose file is gone); empty when read
};

}  // namespace

std::unique_ptr<Task> make_pairs_task(const TaskConfig& config) {
  const auto mode = config.tokenize;
  TokenTable table = initial_table(config, mode);
  const bool saved = !config.vocab_path.empty();
  const std::string vocab_source = saved ? "the run's vocabulary " + config.vocab_path : "the training file " + config.file;
  std::vector<Pair> all;
  try {
    all = read_pairs(config.file, table, !saved, vocab_source);
  } catch (const IoError& e) {
    // A trained run keeps its vocabulary: predicting still works without the file.
    if (!saved) throw;
    return std::make_unique<PairsTask>(config, std::move(table), std::vector<Pair>{}, std::vector<Pair>{}, 0,
                                       std::string(e.what()) + " (the run's vocabulary is in " + config.vocab_path + ")");
  }

  std::vector<Pair> train, heldout;
  int64_t dropped = 0;
  if (!config.heldout_file.empty()) {
    heldout = read_pairs(config.heldout_file, table, false, vocab_source);
    InputSet held;
    for (const Pair& p : heldout) held.insert(p.input);
    for (Pair& p : all) {
      if (held.count(p.input)) ++dropped; else train.push_back(std::move(p));
    }
    if (train.empty())
      throw ValueError("every input of " + config.file + " is also in the held-out file " + config.heldout_file +
                       "; nothing is left to train on");
  } else {
    const auto n = static_cast<int64_t>(all.size());
    int64_t held_n = std::llround(config.heldout_fraction * static_cast<double>(n));
    if (config.heldout_fraction > 0) held_n = std::max<int64_t>(1, held_n);
    if (held_n >= n)
      throw ValueError(config.file + ": holding out " + std::to_string(held_n) + " of its " + std::to_string(n) +
                       " distinct inputs (heldout_fraction " + std::to_string(config.heldout_fraction) +
                       ") leaves nothing to train on");
    // A seeded partial Fisher-Yates shuffle picks the held-out pairs.
    std::vector<size_t> order(all.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    Rng rng(derive_seed(config.seed, kHeldoutStream));
    for (int64_t i = 0; i < held_n; ++i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.integer(i, n - 1))]);
    std::vector<bool> is_held(all.size(), false);
    for (int64_t i = 0; i < held_n; ++i) is_held[order[static_cast<size_t>(i)]] = true;
    for (size_t i = 0; i < all.size(); ++i) (is_held[i] ? heldout : train).push_back(std::move(all[i]));
  }
  return std::make_unique<PairsTask>(config, std::move(table), std::move(train), std::move(heldout), dropped, "");
}

}  // namespace attnlab
