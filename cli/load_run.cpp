#include "cli/load_run.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "framework/io/checkpoint.h"

namespace attnlab::cli {

std::string run_vocab_path(const RunDir& run) { return run.path() + "/vocab.txt"; }

LoadedRun load_run(const RunDir& run, int64_t step) {
  run.require_trained();
  LoadedRun out;
  out.settings = load_run_settings(run);
  out.task = make_task(out.settings.task);
  out.model = make_model(out.settings.model, 0);
  auto steps = run.checkpoint_steps();
  if (step <= 0) step = steps.back();
  if (std::find(steps.begin(), steps.end(), step) == steps.end())
    throw IoError("run '" + run.path() + "' has no checkpoint of step " + std::to_string(step));
  load_checkpoint(run.checkpoint_stem(step), *out.model, nullptr);
  out.step = step;
  return out;
}

}  // namespace attnlab::cli
