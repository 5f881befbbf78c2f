#include "cli/command_line.h"

#include <iostream>

#include "framework/error.h"

namespace attnlab::cli {

po::options_description options_with_help(const std::string& caption) {
  po::options_description out(caption);
  out.add_options()("help,h", "show this help");
  return out;
}

bool parse_command_line(const Args& args, const po::options_description& options, po::variables_map& vm,
                        const std::string& usage, const std::string& footer,
                        const po::positional_options_description* positional) {
  po::command_line_parser parser(args);
  parser.options(options);
  if (positional) parser.positional(*positional);
  po::store(parser.run(), vm);
  if (vm.count("help")) {
    std::cout << usage << options << footer;
    return false;
  }
  po::notify(vm);
  return true;
}

void check_run_and_step(const po::variables_map& vm, const std::string& run_path, int64_t step) {
  if (run_path.empty()) throw ValueError("--run DIR is required");
  if (vm.count("step") && step < 1) throw ValueError("--step must be >= 1, got " + std::to_string(step));
}

void add_run_input_options(po::options_description& opts, po::positional_options_description& positional,
                           RunInputArgs& args) {
  opts.add_options()
      ("run", po::value(&args.run_path), "the run directory (required)")
      ("input", po::value(&args.input_text), "the input sequence, as the task writes it (also the positional argument)")
      ("step", po::value(&args.step), "the checkpoint to use (default: the latest)");
  positional.add("input", 1);
}

void check_run_input(const po::variables_map& vm, const RunInputArgs& args, const std::string& command) {
  check_run_and_step(vm, args.run_path, args.step);
  if (!vm.count("input"))
    throw ValueError("no input sequence given (e.g. attnlab " + command + " --run DIR \"3 1 4\")");
}

}  // namespace attnlab::cli
