// attnlab train: train a model on a task, or --resume a run.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "cli/trainer.h"

namespace attnlab::cli {

namespace fs = std::filesystem;

int run_train(const Args& args) {
  TrainSettings s = default_settings();
  OptionSet experiment = all_train_options(s);
  std::string run_path, config_file, resume_path;
  bool quiet = false, overwrite = false;
  OptionSet general("General");
  general.add("run", &run_path, "run directory to create (default runs/<task>-<model>)", false)
      .add("config", &config_file, "read options from an INI file (name = value, as the long flags); flags win", false)
      .add("resume", &resume_path, "continue the run in this directory from its latest checkpoint (--steps may be raised)", false)
      .flag("overwrite", &overwrite, "replace an existing run directory", false)
      .flag("quiet", &quiet, "print nothing but errors", false);
  po::options_description all;
  all.add_options()("help,h", "show this help");
  all.add(general.description()).add(experiment.description());

  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: attnlab train [options]\n\n"
                 "Trains a transformer on a generated sequence task, evaluates it on held-out examples\n"
                 "(greedy decoding, exact match) every --eval-every steps, checkpoints, and stops at\n"
                 "--steps or once held-out exact match reaches --target. Writes a run directory:\n"
                 "config.ini, metrics.csv, checkpoints/ (safetensors), summary.json.\n\n"
              << all << "\nexamples:\n"
              << "  attnlab train --task reverse --run runs/rev\n"
                 "  attnlab train --task add --model decoder --layers 2 --steps 3000 --run runs/add\n"
                 "  attnlab train --config runs/rev/config.ini --seed 1 --run runs/rev-seed1\n"
                 "  attnlab train --resume runs/rev --steps 4000\n";
    return kExitOk;
  }
  po::notify(vm);  // command-line values win: they are stored first
  if (!resume_path.empty() && !config_file.empty()) throw ValueError("--resume reads the run's own config.ini; drop --config");
  if (!resume_path.empty()) {
    // A resumed run is the same experiment: only how long it runs, how it
    // reports and how many threads it uses (which changes its bits) may change.
    const std::set<std::string> may_change = {"steps", "threads", "eval-every", "log-every", "keep", "target", "on-nan", "probe-every"};
    for (const auto& [name, value] : vm)
      if (!value.defaulted() && experiment.description().find_nothrow(name, false) && !may_change.count(name))
        throw ValueError("--" + name + " cannot change when resuming (it is part of the run's config.ini); start a new run instead");
    if (!run_path.empty() && run_path != resume_path) throw ValueError("--resume and --run name different directories");
    RunDir(resume_path).require_trained();
    config_file = RunDir(resume_path).config_path();
    run_path = resume_path;
  }
  if (!config_file.empty()) {
    std::ifstream in(config_file);
    if (!in) throw IoError("cannot read config file '" + config_file + "'");
    try {
      po::store(po::parse_config_file(in, experiment.description(), false), vm);
    } catch (const po::error& e) {
      throw ValueError(config_file + ": " + e.what());
    }
    // notify() assigns every stored value again, the general options'
    // defaults included: keep what the command line said about them.
    const std::string run_given = run_path;
    po::notify(vm);
    run_path = run_given;
  }
  finalize(s);
  if (run_path.empty()) run_path = "runs/" + s.task.name + "-" + s.model.arch;

  TrainInvocation job;
  job.settings = s;
  job.run = RunDir(run_path);
  job.resume = !resume_path.empty();
  job.quiet = quiet;
  job.config_ini = "# attnlab train: resolved options; repeat with  attnlab train --config " + job.run.config_path() +
                   " --run NEW_DIR\n" + experiment.to_ini();
  if (job.resume) {
    if (job.run.latest_step() >= s.steps)
      throw ValueError("run '" + run_path + "' is already at step " + std::to_string(job.run.latest_step()) +
                       "; pass --steps N with N > " + std::to_string(job.run.latest_step()) + " to continue it");
  } else {
    std::error_code ec;
    if (fs::exists(run_path, ec) && !fs::is_empty(run_path, ec)) {
      if (!overwrite)
        throw ValueError("run directory '" + run_path + "' already exists; use --resume " + run_path +
                         ", another --run, or --overwrite");
      fs::remove_all(run_path);
    }
    fs::create_directories(run_path, ec);
    if (ec) throw IoError("cannot create run directory '" + run_path + "': " + ec.message());
  }
  return train(job);
}

}  // namespace attnlab::cli
