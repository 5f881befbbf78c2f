#pragma once
// The task suite: algorithmic sequence-to-sequence problems generated on the
// fly from a seeded Rng. A task knows how to draw an input, how to compute the
// correct output for any input (`solve`), and how to write both as text.
//
// Tasks (all ids already offset by the 4 specials, see vocab.h):
//   copy       output = input
//   reverse    output = input reversed
//   sort       output = input sorted ascending (symbols compare as numbers)
//   duplicate  output = input twice (x -> xx; the output is twice as long)
//   add        input "a+b" with a, b of `digits` decimal digits each, output the
//              digits of a + b, most significant first, zero-padded to
//              digits + 1 digits so that its length is fixed.
//
// copy/reverse/sort/duplicate draw a length uniformly in [min_len, max_len]
// and then each symbol uniformly from `vocab` symbols (with repetition).
// add draws every digit of both operands uniformly, so leading zeros are
// allowed (a and b are uniform in [0, 10^digits)) and the input length is
// always 2*digits+1; it ignores `vocab`, `min_len` and `max_len`: its
// vocabulary is always the 10 digits and '+' (V = 15).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "datasets/vocab.h"
#include "framework/random.h"

namespace attnlab {

struct TaskConfig {
  std::string name = "reverse";
  int64_t vocab = 16;  // task symbols (copy/reverse/sort/duplicate); model V = 4 + vocab
  int64_t min_len = 16, max_len = 16;  // input length range (copy/reverse/sort/duplicate)
  int64_t digits = 3;                  // add: digits per operand
  uint64_t seed = 0;                   // data seed; see derive_seed in splits.h

  // ValueError naming the field and its value: unknown task (listing the valid
  // names), vocab outside [2, 1000000], min_len < 1, min_len > max_len,
  // max_len > 1000000, digits outside [1, 1000].
  void validate() const;
};

// One example in model token ids (specials offset already applied).
struct Example {
  std::vector<int32_t> input, output;
};

class Task {
 public:
  Task(TaskConfig config, Vocab vocab) : config_(std::move(config)), vocab_(std::move(vocab)) {}
  virtual ~Task() = default;

  virtual std::string name() const = 0;
  // One line: what the task asks, its symbols, lengths and V.
  virtual std::string describe() const = 0;

  // Draws an input from `rng` and pairs it with its correct output.
  Example sample(Rng& rng) const;
  virtual std::vector<int32_t> sample_input(Rng& rng) const = 0;
  // The correct output for any well-formed input (of any length, which is what
  // length-generalisation evaluation and `predict` need); ValueError naming the
  // problem for an input the task cannot answer (special tokens, empty, or for
  // add a malformed "a+b").
  virtual std::vector<int32_t> solve(const std::vector<int32_t>& input) const = 0;

  virtual int64_t min_input_len() const = 0;
  virtual int64_t max_input_len() const = 0;
  virtual int64_t max_output_len() const = 0;
  // How many distinct inputs sample_input can produce (saturates at INT64_MAX).
  virtual int64_t input_space_size() const = 0;

  int64_t vocab_size() const { return vocab_.size(); }  // model V = 4 + symbols
  const Vocab& vocab() const { return vocab_; }
  const TaskConfig& config() const { return config_; }

  std::string to_text(const std::vector<int32_t>& ids) const { return vocab_.to_text(ids); }
  // ValueError naming any unknown symbol.
  std::vector<int32_t> from_text(const std::string& text) const { return vocab_.from_text(text); }

 protected:
  TaskConfig config_;
  Vocab vocab_;
};

// Validates the config, then builds the named task.
std::unique_ptr<Task> make_task(const TaskConfig& config);
// The valid task names, in a fixed order: copy, reverse, sort, add, duplicate.
std::vector<std::string> task_names();

// (input, output) pairs, the form models/batch.h's format_batch takes.
std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> to_pairs(const std::vector<Example>& examples);

// "3 1 4 -> 4 1 3" (add: "123+456 -> 0579").
std::string example_text(const Task& task, const Example& example);

}  // namespace attnlab
