// The four tasks whose output is a fixed function of a sequence of numbered
// symbols: copy, reverse, sort, duplicate. Each is a row of a table (name,
// what it does, its output length, how it solves an input); one class reads it.
#include <algorithm>

#include "datasets/sequence_task.h"

namespace attnlab {

namespace {
using Symbols = std::vector<int32_t>;

struct SequenceRule {
  const char* name;
  const char* what;       // for describe()
  int64_t output_factor;  // output length = this × input length
  Symbols (*solve)(const Symbols& input, int64_t vocab_size);
};

// sort: symbol i has id 4 + i, so sorting ids sorts the symbols as numbers;
// repeated symbols stay repeated. Counting sort: O(T + V), V is small.
Symbols sorted_ascending(const Symbols& input, int64_t vocab_size) {
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size), 0);
  for (int32_t t : input) ++counts[static_cast<size_t>(t)];
  Symbols out;
  out.reserve(input.size());
  for (size_t id = 0; id < counts.size(); ++id) out.insert(out.end(), static_cast<size_t>(counts[id]), static_cast<int32_t>(id));
  return out;
}

// duplicate: x -> xx, twice as long as the input, so it needs a decoder or
// encoder-decoder model (an encoder tagger emits one token per input position).
Symbols repeated_twice(const Symbols& input, int64_t) {
  Symbols out(input);
  out.insert(out.end(), input.begin(), input.end());
  return out;
}

const SequenceRule kCopy{"copy", "output = input", 1, [](const Symbols& in, int64_t) { return in; }};
const SequenceRule kReverse{"reverse", "output = input reversed", 1,
                            [](const Symbols& in, int64_t) { return Symbols(in.rbegin(), in.rend()); }};
const SequenceRule kSort{"sort", "output = input sorted ascending", 1, sorted_ascending};
const SequenceRule kDuplicate{"duplicate", "output = input twice (x -> xx)", 2, repeated_twice};

class RuleTask : public SequenceTask {
 public:
  RuleTask(const TaskConfig& config, const SequenceRule& rule) : SequenceTask(config), rule_(rule) {}
  std::string name() const override { return rule_.name; }
  std::string describe() const override { return describe_as(rule_.what); }
  Symbols solve(const Symbols& input) const override {
    check_input(input);
    return rule_.solve(input, vocab_size());
  }

 protected:
  int64_t output_len(int64_t input_len) const override { return rule_.output_factor * input_len; }

 private:
  const SequenceRule& rule_;
};
}  // namespace

std::unique_ptr<Task> make_copy_task(const TaskConfig& config) { return std::make_unique<RuleTask>(config, kCopy); }
std::unique_ptr<Task> make_reverse_task(const TaskConfig& config) { return std::make_unique<RuleTask>(config, kReverse); }
std::unique_ptr<Task> make_sort_task(const TaskConfig& config) { return std::make_unique<RuleTask>(config, kSort); }
std::unique_ptr<Task> make_duplicate_task(const TaskConfig& config) {
  return std::make_unique<RuleTask>(config, kDuplicate);
}

}  // namespace attnlab
