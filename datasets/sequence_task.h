#pragma once
// Internal to datasets/: the shared base of the tasks whose input is a
// sequence of numbered symbols of random length (copy, reverse, sort,
// duplicate; datasets/sequence_tasks.cpp), and the constructor of each task.
#include <memory>
#include <string>
#include <vector>

#include "datasets/task.h"

namespace attnlab {

class SequenceTask : public Task {
 public:
  explicit SequenceTask(const TaskConfig& config) : Task(config, Vocab::numbered(config.vocab)) {}

  std::vector<int32_t> sample_input(Rng& rng) const override;
  int64_t min_input_len() const override { return config_.min_len; }
  int64_t max_input_len() const override { return config_.max_len; }
  int64_t max_output_len() const override { return output_len(config_.max_len); }
  // Per length, not longest output against shortest input: copy of 4..12
  // symbols fits an encoder tagger, though 12 > 4. Output lengths grow
  // linearly with the input's, so the two ends of the range decide.
  bool outputs_fit_inputs() const override {
    return output_len(config_.min_len) <= config_.min_len && output_len(config_.max_len) <= config_.max_len;
  }
  int64_t input_space_size() const override;  // sum over L in [min_len, max_len] of vocab^L

 protected:
  // The output's length for an input of `input_len` symbols (a linear function).
  virtual int64_t output_len(int64_t input_len) const { return input_len; }
  // ValueError unless the input is non-empty and holds only task symbols.
  void check_input(const std::vector<int32_t>& input) const;
  // "<what it does>; 16 symbols (0..15), length 16..16, V = 20"
  std::string describe_as(const std::string& what) const;
};

std::unique_ptr<Task> make_copy_task(const TaskConfig& config);
std::unique_ptr<Task> make_reverse_task(const TaskConfig& config);
std::unique_ptr<Task> make_sort_task(const TaskConfig& config);
std::unique_ptr<Task> make_duplicate_task(const TaskConfig& config);
std::unique_ptr<Task> make_add_task(const TaskConfig& config);

}  // namespace attnlab
