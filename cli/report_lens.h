#pragma once
// The report's lens data (cli/report/lens_view.js draws it): run.interventions.lens.
#include <nlohmann/json.hpp>

#include "cli/load_run.h"

namespace attnlab::cli {

// {"examples": [...]}: for each entry of the report's attention section (the
// held-out examples it shows, then each --input; each {"source", "input"}),
// the lens and attribution as `attnlab lens --json` gives them
// (lens_example_json), with its "source" and "input"; an input the task
// cannot answer gets {"source", "input", "note"} instead. One forward for all.
nlohmann::json lens_report_data(LoadedRun& loaded, const nlohmann::json& attention);

}  // namespace attnlab::cli
