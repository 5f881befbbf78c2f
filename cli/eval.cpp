// attnlab eval: held-out metrics of a trained run.
#include <omp.h>

#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "cli/evaluate.h"
#include "cli/load_run.h"
#include "datasets/splits.h"

namespace attnlab::cli {

int run_eval(const Args& args) {
  std::string run_path;
  int64_t length = 0, count = 0, examples_shown = 0, step = 0;
  int threads = 1;
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")
      ("run", po::value(&run_path), "the run directory (required)")
      ("len", po::value(&length), "evaluate on inputs of exactly this length (length generalisation; add: digits per operand)")
      ("heldout", po::value(&count), "number of held-out examples (default: as trained)")
      ("step", po::value(&step), "the checkpoint to evaluate (default: the latest)")
      ("examples", po::value(&examples_shown)->default_value(0), "print this many examples with the model's answers")
      ("threads", po::value(&threads)->default_value(1), "OpenMP threads");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: attnlab eval --run DIR [options]\n\n"
                 "Greedy-decodes held-out examples with the run's latest checkpoint and prints token accuracy\n"
                 "and exact match. With --len N the examples have inputs of length N, which may lie outside\n"
                 "the training lengths (they must fit the model's positional table).\n\n"
              << opts << "\nexamples:\n  attnlab eval --run runs/rev --examples 5\n  attnlab eval --run runs/rev --len 12\n";
    return kExitOk;
  }
  po::notify(vm);
  if (run_path.empty()) throw ValueError("--run DIR is required");
  if (vm.count("len") && length < 1) throw ValueError("--len must be >= 1, got " + std::to_string(length));
  if (vm.count("heldout") && count < 1) throw ValueError("--heldout must be >= 1, got " + std::to_string(count));
  if (examples_shown < 0) throw ValueError("--examples must be >= 0, got " + std::to_string(examples_shown));
  if (threads < 1) throw ValueError("--threads must be >= 1, got " + std::to_string(threads));
  omp_set_num_threads(threads);

  LoadedRun loaded = load_run(RunDir(run_path), step);
  const TrainSettings& s = loaded.settings;
  int64_t n = count > 0 ? count : s.heldout;
  HeldOut heldout;
  std::string which;
  if (length > 0) {
    auto task = make_task(with_length(s.task, length));
    heldout = make_heldout(*task, n, derive_seed(s.seed, kHeldoutStream));
    which = "inputs of length " + std::to_string(length);
  } else {
    heldout = make_heldout(*loaded.task, n, derive_seed(s.seed, kHeldoutStream));
    which = "the held-out set";
  }
  std::vector<std::vector<int32_t>> predictions;
  Accuracy acc = greedy_accuracy(*loaded.model, heldout.examples(), 256, &predictions);
  std::cout << std::fixed << std::setprecision(2) << "run " << run_path << " (step " << loaded.step << "), "
            << heldout.size() << " examples, " << which << "\n"
            << "exact match     " << 100 * acc.exact << "%\n"
            << "token accuracy  " << 100 * acc.token << "%\n";
  for (int64_t i = 0; i < std::min<int64_t>(examples_shown, heldout.size()); ++i) {
    const Example& e = heldout.examples()[static_cast<size_t>(i)];
    bool right = predictions[static_cast<size_t>(i)] == e.output;
    std::cout << "  " << loaded.task->to_text(e.input) << "  ->  " << loaded.task->to_text(predictions[static_cast<size_t>(i)])
              << (right ? "   (correct)" : "   (expected " + loaded.task->to_text(e.output) + ")") << "\n";
  }
  return kExitOk;
}

}  // namespace attnlab::cli
