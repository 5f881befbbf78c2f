#pragma once
// What `attnlab lens` (cli/lens.cpp) and the report's lens view
// (cli/report_lens.cpp) share: an input text as the batch the lens reads, and
// one example's lens and attribution as JSON (docs/interventions.md).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/load_run.h"
#include "interventions/lens.h"

namespace attnlab::cli {

// An input and its right answer: each position's answer is task->solve's
// (teacher-forced), a language model's the next character of the text (at
// most its training context, the latest characters, with a note on stderr).
// ValueError for a text the task cannot parse or answer.
TokenPairs lens_pairs(const LoadedRun& loaded, const std::string& text);

// Example b of `reading` (over `batch`): "points", "tokens" (what the model
// reads at each output position), "answers" (the right token, null where
// none), "lens" ([point][position] {top, p_top, p_answer, rank}: rank and
// p_answer null where no answer), "attribution" ([{position, answer, logit,
// inverse_scale, parts: [{component, logit}]}], null for post-LN, with
// "attribution_note" saying why) and "ids" (the batch's token ids).
nlohmann::json lens_example_json(const LoadedRun& loaded, const FormattedBatch& batch, const LensReading& reading,
                                 int64_t b);

}  // namespace attnlab::cli
