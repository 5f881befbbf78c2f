#include "datasets/task.h"

#include <limits>

#include "datasets/more_tasks.h"
#include "datasets/sequence_task.h"
#include "framework/error.h"

namespace attnlab {

namespace {

constexpr int64_t kMaxVocab = 1000000;   // ids must fit int32 with room to spare
constexpr int64_t kMaxLen = 1000000;     // a sequence longer than this is a typo
constexpr int64_t kMaxDigits = 1000;

using Factory = std::unique_ptr<Task> (*)(const TaskConfig&);
struct TaskEntry {
  const char* name;
  Factory make;
};
const TaskEntry kTasks[] = {
    {"copy", make_copy_task},
    {"reverse", make_reverse_task},
    {"sort", make_sort_task},
    {"add", make_add_task},
    {"duplicate", make_duplicate_task},
    {"induction", make_induction_task},
    {"recall", make_recall_task},
    {"repeat", make_repeat_task},
    {"modular", make_modular_task},
    {"pairs", make_pairs_task},
    {"text", make_text_task},
};
constexpr size_t kSuiteSize = 5;  // copy .. duplicate: the algorithmic suite

std::string joined_names() {
  std::string s;
  for (const auto& e : kTasks) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

// a * b, or INT64_MAX when it would overflow.
int64_t saturating_mul(int64_t a, int64_t b) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  return (b != 0 && a > big / b) ? big : a * b;
}
int64_t saturating_add(int64_t a, int64_t b) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  return (a > big - b) ? big : a + b;
}

}  // namespace

void TaskConfig::validate() const {
  bool known = false;
  for (const auto& e : kTasks) known = known || name == e.name;
  if (!known) throw ValueError("unknown task '" + name + "'; valid tasks: " + joined_names());
  if (vocab < 2 || vocab > kMaxVocab)
    throw ValueError("task vocab = " + std::to_string(vocab) + " is invalid; expected 2.." + std::to_string(kMaxVocab) +
                     " symbols");
  if (min_len < 1) throw ValueError("task min_len = " + std::to_string(min_len) + " is invalid; expected >= 1");
  if (min_len > max_len)
    throw ValueError("task min_len = " + std::to_string(min_len) + " is greater than max_len = " +
                     std::to_string(max_len));
  if (max_len > kMaxLen)
    throw ValueError("task max_len = " + std::to_string(max_len) + " is too large; expected <= " +
                     std::to_string(kMaxLen));
  if (digits < 1 || digits > kMaxDigits)
    throw ValueError("task digits = " + std::to_string(digits) + " is invalid; expected 1.." +
                     std::to_string(kMaxDigits));
  if (span < 1 || span > kMaxLen)
    throw ValueError("task span = " + std::to_string(span) + " is invalid; expected 1.." + std::to_string(kMaxLen));
  if (seq_len < 1 || seq_len > kMaxLen)
    throw ValueError("task seq_len = " + std::to_string(seq_len) + " is invalid; expected 1.." +
                     std::to_string(kMaxLen));
  if (name == "repeat" && min_len < 2)
    throw ValueError("--task repeat needs --min-len >= 2 (a symbol to predict from its earlier occurrence), got " +
                     std::to_string(min_len));
  if (name == "modular") check_modular(*this);
  if (name == "pairs" || name == "text") {
    if (file.empty()) throw ValueError("task " + name + " reads its examples from a file: give --file PATH");
    const bool text = name == "text";
    // text needs a held-out tail to report bits per character; pairs may take a --heldout-file instead.
    if (!(heldout_fraction >= 0 && heldout_fraction < 1) || (text && heldout_fraction == 0))
      throw ValueError("task heldout_fraction = " + std::to_string(heldout_fraction) + " is invalid; expected " +
                       (text ? "0 < f < 1" : "0 <= f < 1"));
  }
}

std::unique_ptr<Task> make_task(const TaskConfig& config) {
  config.validate();
  for (const auto& e : kTasks)
    if (config.name == e.name) return e.make(config);
  throw ValueError("unknown task '" + config.name + "'; valid tasks: " + joined_names());  // unreachable
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < kSuiteSize; ++i) names.emplace_back(kTasks[i].name);
  return names;
}

std::vector<std::string> all_task_names() {
  std::vector<std::string> names;
  for (const auto& e : kTasks) names.emplace_back(e.name);
  return names;
}

Example Task::sample(Rng& rng) const {
  Example ex;
  ex.input = sample_input(rng);
  ex.output = solve(ex.input);
  return ex;
}

std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> to_pairs(const std::vector<Example>& examples) {
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
  pairs.reserve(examples.size());
  for (const auto& ex : examples) pairs.emplace_back(ex.input, ex.output);
  return pairs;
}

std::string example_text(const Task& task, const Example& example) {
  return task.to_text(example.input) + " -> " + task.to_text(example.output);
}

// ---- SequenceTask ----

std::vector<int32_t> SequenceTask::sample_input(Rng& rng) const {
  const int64_t len = rng.integer(config_.min_len, config_.max_len);
  std::vector<int32_t> input(static_cast<size_t>(len));
  for (auto& t : input) t = Vocab::symbol_id(rng.integer(0, config_.vocab - 1));
  return input;
}

int64_t SequenceTask::input_space_size() const {
  int64_t total = 0;
  int64_t power = 1;  // vocab^L
  for (int64_t L = 1; L <= config_.max_len; ++L) {
    power = saturating_mul(power, config_.vocab);
    if (L >= config_.min_len) total = saturating_add(total, power);
    if (total == std::numeric_limits<int64_t>::max()) break;
  }
  return total;
}

void SequenceTask::check_input(const std::vector<int32_t>& input) const {
  if (input.empty()) throw ValueError(name() + ": the input is empty");
  for (size_t i = 0; i < input.size(); ++i) {
    const int32_t t = input[i];
    if (t < kNumSpecial || t >= vocab_size())
      throw ValueError(name() + ": input token " + std::to_string(i) + " has id " + std::to_string(t) +
                       ", expected a task symbol id in [" + std::to_string(kNumSpecial) + ", " +
                       std::to_string(vocab_size()) + ")");
  }
}

std::string SequenceTask::describe_as(const std::string& what) const {
  return name() + ": " + what + "; " + std::to_string(config_.vocab) + " symbols (0.." +
         std::to_string(config_.vocab - 1) + "), length " + std::to_string(config_.min_len) + ".." +
         std::to_string(config_.max_len) + ", V = " + std::to_string(vocab_size());
}

}  // namespace attnlab
