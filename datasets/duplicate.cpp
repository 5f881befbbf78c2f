// duplicate: x -> xx. The output is twice as long as the input, so this task
// needs a decoder or encoder-decoder model (an encoder tagger emits one token
// per input position).
#include "datasets/sequence_task.h"

namespace attnlab {

namespace {
class DuplicateTask : public SequenceTask {
 public:
  using SequenceTask::SequenceTask;
  std::string name() const override { return "duplicate"; }
  std::string describe() const override { return describe_as("output = input twice (x -> xx)"); }
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    check_input(input);
    std::vector<int32_t> out;
    out.reserve(2 * input.size());
    out.insert(out.end(), input.begin(), input.end());
    out.insert(out.end(), input.begin(), input.end());
    return out;
  }

 protected:
  int64_t output_len(int64_t input_len) const override { return 2 * input_len; }
};
}  // namespace

std::unique_ptr<Task> make_duplicate_task(const TaskConfig& config) { return std::make_unique<DuplicateTask>(config); }

}  // namespace attnlab
