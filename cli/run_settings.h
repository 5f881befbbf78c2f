#pragma once
// A run directory's config.ini read back into the settings it was trained with.
#include <map>
#include <string>

#include <boost/program_options.hpp>

#include "cli/train_options.h"
#include "training/run_dir/layout.h"

namespace attnlab::cli {

// Reads a run's config.ini into settings (then `extra` command-line args may
// override some of them); IoError for a missing or foreign directory.
TrainSettings load_run_settings(const RunDir& run);

// A run's config.ini read into `vm` without an init line was written before
// --init existed, when every model was torch-initialised: `s` says so,
// whatever today's default.
void read_missing_init_as_torch(const boost::program_options::variables_map& vm, TrainSettings& s);

// The "name = value" lines of an INI text, such as config.ini or a
// checkpoint's record of it (comments, sections and blank lines skipped;
// names and values trimmed).
std::map<std::string, std::string> ini_values(const std::string& text);

}  // namespace attnlab::cli
