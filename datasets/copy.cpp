// copy: the output is the input, unchanged.
#include "datasets/sequence_task.h"

namespace attnlab {

namespace {
class CopyTask : public SequenceTask {
 public:
  using SequenceTask::SequenceTask;
  std::string name() const override { return "copy"; }
  std::string describe() const override { return describe_as("output = input"); }
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    check_input(input);
    return input;
  }
};
}  // namespace

std::unique_ptr<Task> make_copy_task(const TaskConfig& config) { return std::make_unique<CopyTask>(config); }

}  // namespace attnlab
