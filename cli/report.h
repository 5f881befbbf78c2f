#pragma once
// attnlab report's page, for the command and for train --report.
#include <string>
#include <utility>
#include <vector>

namespace attnlab::cli {

// Writes the page of `runs` (run or sweep directories) with the attention of
// `inputs` and activation patching of each (clean, corrupt) of `patch_pairs` to `out` ("" = the first run's report.html), whole or not at all;
// an existing file only when attnlab wrote it, or with `overwrite`. Returns
// the path written. `eager`: every part of the page is built as it opens, not
// when scrolled to (for a static capture). ValueError/IoError (exit 2) for
// what it cannot read or replace.
std::string write_report(const std::vector<std::string>& runs, const std::vector<std::string>& inputs, std::string out,
                         bool overwrite, bool eager = false,
                         const std::vector<std::pair<std::string, std::string>>& patch_pairs = {});

}  // namespace attnlab::cli
