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
//
// Probes of attention (datasets/induction.cpp, recall.cpp):
//   induction  input: L distinct random symbols, then one of them again (the
//              cue); output: the `span` symbols that followed the cue.
//   recall     input: n key-value pairs then a query key; output: the key
//              again and its value.
// A language model of in-context copying (datasets/repeat.cpp):
//   repeat     windows r r: L random symbols and the same L again, every
//              position predicting the next; the repeat is predictable only
//              from context (an induction head).
// A fixed set of all pairs (datasets/modular.cpp), see docs/data.md:
//   modular    input "a op b =", output the one residue a op b mod p; trains on
//              a seeded fraction of the pairs and holds out exactly the rest.
// Tasks read from files (datasets/pairs.cpp, text.cpp), see docs/data.md:
//   pairs      input<TAB>output lines of `file`; words or characters.
//   text       a character-level language model over `file`: random windows
//              of seq_len characters, each position predicting the next.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "datasets/modular_op.h"
#include "datasets/token_table.h"
#include "datasets/vocab.h"
#include "framework/random.h"

namespace attnlab {

struct TaskConfig {
  std::string name = "reverse";
  int64_t vocab = 16;  // task symbols (copy/reverse/sort/duplicate); model V = 4 + vocab
  int64_t min_len = 16, max_len = 16;  // input length range (copy/reverse/sort/duplicate)
  int64_t digits = 3;                  // add: digits per operand
  uint64_t seed = 0;                   // data seed; see derive_seed in splits.h
  int64_t span = 3;                    // induction: symbols to continue after the cue
  std::string file;                    // pairs, text: the training file
  std::string heldout_file;            // pairs: held-out pairs (default: a fraction of `file`)
  double heldout_fraction = 0.1;       // pairs: of the distinct inputs; text: the tail of the file
  Tokenize tokenize = Tokenize::words;  // pairs
  int64_t seq_len = 64;                // text: characters per training window
  std::string vocab_path;              // pairs, text: a run's saved vocab.txt (set when loading a run)
  ModularOp operation = ModularOp::add;  // modular: c = a op b mod modulus
  int64_t modulus = 113;               // modular: p (Nanda et al.'s 113)
  double train_fraction = 0.3;         // modular: share of all pairs in the training set, the rest held out

  // ValueError naming the field and its value: unknown task (listing the valid
  // names), vocab outside [2, 1000000], min_len < 1, min_len > max_len,
  // max_len > 1000000, digits outside [1, 1000]; span or seq_len outside
  // [1, 1000000], pairs/text without a file, heldout_fraction outside [0, 1)
  // (text: (0, 1)); modular: modulus outside [2, 1000], div with a modulus
  // that is not prime, train_fraction outside (0, 1), or one that leaves no
  // training pair or no held-out pair (round(f × pairs) is 0 or all).
  void validate() const;
};

// How the in-context loss splits a language model's window of targets
// (training/evaluate.h): the early targets are [0, early_end), the late ones
// [late_begin, end).
struct ContextSplit {
  int64_t early_end = 0, late_begin = 0;
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

  // Draws an input from `rng` and pairs it with its correct output (text:
  // a window and the same window shifted by one).
  virtual Example sample(Rng& rng) const;
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

  virtual std::string to_text(const std::vector<int32_t>& ids) const { return vocab_.to_text(ids); }
  // ValueError naming any unknown symbol.
  virtual std::vector<int32_t> from_text(const std::string& text) const { return vocab_.from_text(text); }
  // The written form of one id (use this, not vocab().token: tasks read from
  // files keep their words in a TokenTable and vocab() only has their count).
  virtual std::string token_text(int32_t id) const { return vocab_.token(id); }

  // Tasks read from files fix their held-out examples when built (disjoint
  // from every input sample() draws); generated tasks return null and the
  // held-out set is drawn by make_heldout.
  virtual const std::vector<Example>* own_heldout() const { return nullptr; }
  // A task whose training set is fixed when built (modular): its examples, in
  // the order a TrainSet walks them (datasets/train_set.h); null for the others.
  virtual const std::vector<Example>* own_train() const { return nullptr; }
  // A language model (text): examples are windows trained with
  // format_batch(BatchFormat::lm, ...) and scored by loss, not by greedy exact match.
  virtual bool language_model() const { return false; }
  // What a language model's token is in messages: "character" (text), "token".
  virtual std::string token_unit() const { return "token"; }
  // A language model's window of `targets` targets as the in-context loss
  // compares it (late minus early, Olsson et al. 2022): its halves, or as the
  // task knows its windows (repeat: the first copy against the repeat).
  virtual ContextSplit in_context_split(int64_t targets) const { return {targets / 2, targets / 2}; }
  // A language model's text as token ids, split as it is trained on and held
  // out: {training part, held-out part}; both empty for other tasks (or when
  // the file is gone).
  virtual std::pair<std::vector<int32_t>, std::vector<int32_t>> text_split() const { return {}; }
  // Whether every output is at most as long as its input (an encoder tagger
  // can learn the task).
  virtual bool outputs_fit_inputs() const { return max_output_len() <= min_input_len(); }
  // The vocabulary a run must keep to map text the same way later (vocab.txt);
  // empty for generated tasks, whose vocabulary follows from the config.
  virtual std::string saved_vocab() const { return {}; }
  // Where the longest input and output come from ("FILE line N"), to name
  // them when they do not fit the model; empty for generated tasks.
  virtual std::string longest_source() const { return {}; }

 protected:
  TaskConfig config_;
  Vocab vocab_;
};

// Validates the config, then builds the named task.
std::unique_ptr<Task> make_task(const TaskConfig& config);
// The algorithmic suite, in a fixed order: copy, reverse, sort, add, duplicate.
std::vector<std::string> task_names();
// Every task make_task builds: the suite, then induction and recall (generated
// probes of attention), repeat (in-context copying), modular (a fixed set of
// pairs), then pairs and text (read from files).
std::vector<std::string> all_task_names();

// (input, output) pairs, the form models/batch.h's format_batch takes.
std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> to_pairs(const std::vector<Example>& examples);

// "3 1 4 -> 4 1 3" (add: "123+456 -> 0579").
std::string example_text(const Task& task, const Example& example);

}  // namespace attnlab
