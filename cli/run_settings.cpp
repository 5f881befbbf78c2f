#include "cli/run_settings.h"

#include <filesystem>
#include <sstream>

#include "cli/command_line.h"
#include "framework/error.h"

namespace attnlab::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

void read_missing_init_as_torch(const po::variables_map& vm, TrainSettings& s) {
  if (!vm.count("init") || vm["init"].defaulted()) s.model.init = InitScheme::torch;  // defaulted: not in the file
}

TrainSettings load_run_settings(const RunDir& run) {
  run.require_directory();
  std::error_code ec;
  if (!fs::exists(run.config_path(), ec))
    throw IoError("'" + run.path() + "' is not an attnlab run directory (no readable config.ini)");
  TrainSettings s = default_settings();
  OptionSet options = all_train_options(s);
  po::variables_map vm;
  store_config_file(run.config_path(), options.description(), vm);  // as --config: no device, no binary, no BOM
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw IoError(run.config_path() + ": " + e.what());
  }
  read_missing_init_as_torch(vm, s);
  // A run with a saved vocabulary (file tasks) builds its task from it, not
  // from its data file, which may have changed or gone since.
  const std::string vocab = run.path() + "/vocab.txt";
  if (fs::exists(vocab, ec)) s.task.vocab_path = vocab;
  finalize(s);
  return s;
}

std::map<std::string, std::string> ini_values(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || line[0] == '[' || eq == std::string::npos) continue;
    const auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t\r"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
      return s;
    };
    out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

}  // namespace attnlab::cli
