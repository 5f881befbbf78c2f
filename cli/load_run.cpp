#include "cli/load_run.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "framework/io/checkpoint.h"

namespace attnlab::cli {

namespace {

// load_run_settings, except that a run with a vocab.txt builds its task from
// that vocabulary rather than from its (possibly changed) file.
TrainSettings read_settings(const RunDir& run) {
  const std::string vocab = run_vocab_path(run);
  std::error_code ec;
  if (!std::filesystem::exists(vocab, ec)) return load_run_settings(run);
  std::ifstream in(run.config_path());
  if (!in) throw IoError("'" + run.path() + "' is not an attnlab run directory (no readable config.ini)");
  TrainSettings s = default_settings();
  OptionSet options = all_train_options(s);
  po::variables_map vm;
  try {
    po::store(po::parse_config_file(in, options.description(), false), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw IoError(run.config_path() + ": " + e.what());
  }
  s.task.vocab_path = vocab;
  finalize(s);
  return s;
}

}  // namespace

std::string run_vocab_path(const RunDir& run) { return run.path() + "/vocab.txt"; }

LoadedRun load_run(const RunDir& run, int64_t step) {
  run.require_trained();
  LoadedRun out;
  out.settings = read_settings(run);
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
