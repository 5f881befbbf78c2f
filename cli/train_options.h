#pragma once
// The flags of `attnlab train` (and the model/task flags other commands
// share), bound to the fields of TrainSettings as the table of
// training/settings_options.h declares them.
#include <set>
#include <string>

#include "cli/option_set.h"
#include "training/settings.h"

namespace attnlab::cli {

// One group of `train`'s options (the table of training/settings_options.h),
// bound to `s` and captioned with the group's name; all of them.
OptionSet option_group(OptionGroup group, TrainSettings& s);
OptionSet all_train_options(TrainSettings& s);

// Refuses the options the user wrote on the command line (`given`, the names
// given_options returns right after parsing) that the task or model would
// ignore (--digits with copy): ValueError naming them. A config file is not
// checked this way, since a run's config.ini holds every option, applicable
// or not. Call it before finalize().
void check_given_flags(const TrainSettings& s, const std::set<std::string>& given);

}  // namespace attnlab::cli
