// sort: the output is the input sorted ascending. Symbol i has id 4 + i, so
// sorting ids sorts the symbols as numbers; repeated symbols stay repeated.
#include <algorithm>

#include "datasets/sequence_task.h"

namespace attnlab {

namespace {
class SortTask : public SequenceTask {
 public:
  using SequenceTask::SequenceTask;
  std::string name() const override { return "sort"; }
  std::string describe() const override { return describe_as("output = input sorted ascending"); }
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    check_input(input);
    // Counting sort: O(T + V), and the vocabulary is small.
    std::vector<int64_t> counts(static_cast<size_t>(vocab_size()), 0);
    for (int32_t t : input) ++counts[static_cast<size_t>(t)];
    std::vector<int32_t> out;
    out.reserve(input.size());
    for (size_t id = 0; id < counts.size(); ++id) out.insert(out.end(), static_cast<size_t>(counts[id]), static_cast<int32_t>(id));
    return out;
  }
};
}  // namespace

std::unique_ptr<Task> make_sort_task(const TaskConfig& config) { return std::make_unique<SortTask>(config); }

}  // namespace attnlab
