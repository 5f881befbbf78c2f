#include "cli/train_options.h"

#include <algorithm>
#include <vector>

#include "framework/error.h"

namespace attnlab::cli {

OptionSet option_group(OptionGroup group, TrainSettings& s) {
  OptionSet o(name_of(group));
  for (const TrainOption& option : train_options())
    if (option.group == group) o.add(option.flag, option.field(s), option.help);
  return o;
}

OptionSet all_train_options(TrainSettings& s) {
  OptionSet o("");
  for (const auto& group : choice_names(OptionGroup{})) o.add(option_group(group.value, s));
  return o;
}

namespace {

// Each task's own options, and the tasks they apply to (see datasets/task.h).
struct TaskOption {
  const char* name;
  std::vector<std::string> tasks;
};
const TaskOption kTaskOptions[] = {
    {"vocab", {"copy", "reverse", "sort", "duplicate", "induction", "recall", "repeat"}},
    {"min-len", {"copy", "reverse", "sort", "duplicate", "induction", "recall", "repeat"}},
    {"max-len", {"copy", "reverse", "sort", "duplicate", "induction", "recall", "repeat"}},
    {"digits", {"add"}},
    {"span", {"induction"}},
    {"file", {"pairs", "text"}},
    {"heldout-file", {"pairs"}},
    {"heldout-fraction", {"pairs", "text"}},
    {"tokenize", {"pairs"}},
    {"seq-len", {"text"}},
};

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace

// The optimizer's options are checked on their values (finalize), which a
// run's config.ini keeps at their defaults; the task's are not (config.ini
// holds --vocab of an add run), so only what the user wrote is checked here.

void check_given_flags(const TrainSettings& s, const std::set<std::string>& given_names) {
  auto given = [&](const std::string& name) { return given_names.count(name) > 0; };
  const std::string& task = s.task.name;
  for (const TaskOption& o : kTaskOptions)
    if (given(o.name) && std::find(o.tasks.begin(), o.tasks.end(), task) == o.tasks.end())
      throw ValueError("--" + std::string(o.name) + " applies to --task " + listed(o.tasks) + ", not " + task);
  const bool file_heldout = task == "pairs" || task == "text";
  if (given("heldout") && file_heldout)
    throw ValueError(std::string("--heldout applies to generated tasks, not ") + task + ": its held-out examples are " +
                     (s.task.heldout_file.empty() ? "--heldout-fraction of --file" : "the pairs of --heldout-file"));
  if (given("heldout-fraction") && !s.task.heldout_file.empty())
    throw ValueError("--heldout-fraction does not apply with --heldout-file: the held-out pairs are that file's");
  if (given("heads") && s.model.parameter_free_attention)
    throw ValueError("--heads does not apply to --parameter-free-attention (one head over the whole width)");
}

}  // namespace attnlab::cli
