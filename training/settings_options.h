#pragma once
// Every option of a training run declared once: its group, its flag (also
// its config.ini key), its help, whether `--resume` may change it and the
// least value of an integer (finalize checks it, training/settings.h). The
// model's options come from models/model_options.h. The CLI's flags, --help,
// config.ini (the table's order), run loading and the resume rules read it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "training/settings.h"

namespace attnlab {

// Where an option's value lives in a TrainSettings, whatever its type.
using FieldRef = std::variant<int64_t*, double*, bool*, std::string*, uint64_t*, int*, Arch*, Positional*, Norm*,
                              InitScheme*, Layout*, Activation*, Precision*, Tokenize*, ModularOp*, OptimizerKind*,
                              ScheduleKind*, OnNan*, Reduction*>;

// The groups of --help, in its order; each one's name is its caption.
enum class OptionGroup { task, model, optimization, training };
const ChoiceNames<OptionGroup>& choice_names(OptionGroup);

struct TrainOption {
  OptionGroup group;
  const char* flag;   // the long flag and config.ini key
  std::function<FieldRef(TrainSettings&)> field;
  const char* help;  // a choice's values come from its table (see ModelOption::help)
  bool resume_may_change = false;  // how long a run goes and how it reports, not what it is
  std::optional<int64_t> at_least = std::nullopt;  // "--flag must be >= N, got V" below it
};

// Every option, in the order of --help and config.ini.
const std::vector<TrainOption>& train_options();

// Whether `--resume` may give option `flag` another value than the run's
// config.ini: only how long the run goes, how it reports, and the threads and
// micro-batches it uses (which change its bits).
bool resume_may_change(const std::string& flag);

}  // namespace attnlab
