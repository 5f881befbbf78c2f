// reverse: the output is the input read backwards.
#include "datasets/sequence_task.h"

namespace attnlab {

namespace {
class ReverseTask : public SequenceTask {
 public:
  using SequenceTask::SequenceTask;
  std::string name() const override { return "reverse"; }
  std::string describe() const override { return describe_as("output = input reversed"); }
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    check_input(input);
    return std::vector<int32_t>(input.rbegin(), input.rend());
  }
};
}  // namespace

std::unique_ptr<Task> make_reverse_task(const TaskConfig& config) { return std::make_unique<ReverseTask>(config); }

}  // namespace attnlab
