// attnlab: train and study small transformers on toy sequence tasks.
#include <boost/program_options/errors.hpp>
#include <cstring>
#include <iostream>

#include "cli/commands.h"
#include "framework/error.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const attnlab::cli::Args&);
};

const Command kCommands[] = {
    {"train", "train a model on a task (or --resume a run)", attnlab::cli::run_train},
    {"eval", "held-out metrics of a trained run, optionally at another length", attnlab::cli::run_eval},
    {"predict", "the trained model's answer for an input sequence", attnlab::cli::run_predict},
    {"tasks", "list the tasks with an example of each", attnlab::cli::run_tasks},
    {"bench", "training throughput on the BENCHMARK.md workload (one JSON line)", attnlab::cli::run_bench},
    {"gradcheck", "finite-difference check of a model's gradients (train's model flags)", attnlab::cli::run_gradcheck},
    {"attention", "a trained model's attention weights for one input, as CSV maps", attnlab::cli::run_attention},
};

void print_usage(std::ostream& out) {
  out << "attnlab - train and study small transformers on toy sequence tasks\n\n"
         "usage: attnlab <command> [options]\n"
         "       attnlab <command> --help     options of one command\n\n"
         "commands:\n";
  for (const Command& c : kCommands) {
    out << "  " << c.name;
    for (size_t i = std::strlen(c.name); i < 11; ++i) out << ' ';
    out << c.summary << '\n';
  }
  out << "\nexample:\n  attnlab train --task reverse --run runs/reverse\n"
         "  attnlab predict --run runs/reverse \"3 1 4 1 5\"\n";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace attnlab;
  if (argc < 2) {
    print_usage(std::cerr);
    return cli::kExitUsage;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(std::cout);
    return cli::kExitOk;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    cli::Args args(argv + 2, argv + argc);
    try {
      return c.run(args);
    } catch (const boost::program_options::error& e) {
      std::cerr << "attnlab " << name << ": " << e.what() << " (see attnlab " << name << " --help)\n";
      return cli::kExitUsage;
    } catch (const std::invalid_argument& e) {  // ShapeError, ValueError
      std::cerr << "attnlab " << name << ": " << e.what() << '\n';
      return cli::kExitUsage;
    } catch (const IoError& e) {
      std::cerr << "attnlab " << name << ": " << e.what() << '\n';
      return cli::kExitUsage;
    } catch (const std::exception& e) {
      std::cerr << "attnlab " << name << ": internal error: " << e.what() << '\n';
      return cli::kExitFailure;
    }
  }
  std::cerr << "attnlab: unknown command '" << name << "' (commands: train, eval, predict, tasks, bench, gradcheck, attention; see attnlab --help)\n";
  return cli::kExitUsage;
}
