// attnlab eval: held-out metrics of a trained run.
#include <omp.h>

#include <algorithm>
#include <iomanip>
#include <iostream>

#include "cli/command_line.h"
#include "cli/load_run.h"
#include "datasets/splits.h"
#include "training/evaluate.h"

namespace attnlab::cli {

namespace {

// The first `shown` examples with the model's answers.
void print_examples(const Task& task, const std::vector<Example>& examples,
                    const std::vector<std::vector<int32_t>>& predictions, int64_t shown) {
  for (size_t i = 0; i < std::min<size_t>(static_cast<size_t>(shown), examples.size()); ++i) {
    const Example& e = examples[i];
    std::cout << "  " << task.to_text(e.input) << "  ->  " << task.to_text(predictions[i])
              << (predictions[i] == e.output ? "   (correct)" : "   (expected " + task.to_text(e.output) + ")") << "\n";
  }
}

// Held-out inputs of exactly `length` tokens (digits for add), drawn as training draws its held-out set.
HeldOut heldout_at_length(const TrainSettings& s, int64_t length, int64_t n) {
  auto task = make_task(with_length(s.task, length));
  const int64_t positions = needed_positions(*task, s.model.arch);
  if (positions > s.model.max_len)
    throw ValueError("--len " + std::to_string(length) + " needs sequences of " + std::to_string(positions) +
                     " positions; this model's positional table has " + std::to_string(s.model.max_len) +
                     " (set by --positions when it was trained)");
  return make_heldout(*task, n, derive_seed(s.seed, kHeldoutStream));
}

// Held-out metrics of a task read from a file: a language model's loss and
// bits per character, or greedy exact match over the file's held-out pairs.
int report_own_heldout(LoadedRun& loaded, const std::string& run_path, const std::vector<Example>& examples,
                       int64_t examples_shown) {
  const Task& task = *loaded.task;
  std::cout << std::fixed << std::setprecision(2) << "run " << run_path << " (step " << loaded.step << "), ";
  if (task.language_model()) {
    LmScore lm = lm_score(*loaded.model, examples, 64);
    std::cout << lm.tokens << " held-out characters (the end of " << task.config().file << ")\n"
              << std::setprecision(4) << "loss               " << lm.loss << " nats per character\n"
              << "bits per character " << lm.bits_per_token << "\n"
              << std::setprecision(2) << "next-char accuracy " << 100 * lm.token << "%\n";
    return kExitOk;
  }
  std::vector<std::vector<int32_t>> predictions;
  Accuracy acc = greedy_accuracy(*loaded.model, examples, 256, &predictions);
  std::cout << examples.size() << " held-out pairs of " << task.config().file << "\n"
            << "exact match     " << 100 * acc.exact << "%\n"
            << "token accuracy  " << 100 * acc.token << "%\n";
  print_examples(task, examples, predictions, examples_shown);
  return kExitOk;
}

}  // namespace

int run_eval(const Args& args) {
  std::string run_path;
  int64_t length = 0, count = 0, examples_shown = 0, step = 0;
  int threads = 1;
  po::options_description opts = options_with_help("Options");
  opts.add_options()
      ("run", po::value(&run_path), "the run directory (required)")
      ("len", po::value(&length), "evaluate on inputs of exactly this length (length generalisation; add: digits per operand)")
      ("heldout", po::value(&count), "number of held-out examples (default: as trained)")
      ("step", po::value(&step), "the checkpoint to evaluate (default: the latest)")
      ("examples", po::value(&examples_shown)->default_value(0), "print this many examples with the model's answers")
      ("threads", po::value(&threads)->default_value(1), "OpenMP threads");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm,
                          "usage: attnlab eval --run DIR [options]\n\n"
                          "Greedy-decodes held-out examples with the run's latest checkpoint and prints token accuracy\n"
                          "and exact match. With --len N the examples have inputs of length N, which may lie outside\n"
                          "the training lengths (they must fit the model's positional table).\n"
                          "Answers are decoded until <eos>, one token past the longest expected answer, or the end of\n"
                          "the positional table (P = --positions at training: a decoder reads [bos] INPUT [sep] ANSWER,\n"
                          "so input + answer <= P - 1 tokens; seq2seq answers at most P tokens), whichever comes first.\n\n",
                          "\nexamples:\n  attnlab eval --run runs/rev --examples 5\n  attnlab eval --run runs/rev --len 12\n"))
    return kExitOk;
  check_run_and_step(vm, run_path, step);
  if (vm.count("len") && length < 1) throw ValueError("--len must be >= 1, got " + std::to_string(length));
  if (vm.count("heldout") && count < 1) throw ValueError("--heldout must be >= 1, got " + std::to_string(count));
  if (examples_shown < 0) throw ValueError("--examples must be >= 0, got " + std::to_string(examples_shown));
  if (threads < 1 || threads > 1024) throw ValueError("--threads must be in [1, 1024], got " + std::to_string(threads));
  if (count > 10000000) throw ValueError("--heldout must be <= 10000000, got " + std::to_string(count));
  omp_set_num_threads(threads);

  LoadedRun loaded = load_run(RunDir(run_path), step);
  const TrainSettings& s = loaded.settings;
  int64_t n = count > 0 ? count : s.heldout;
  HeldOut heldout;
  std::string which;
  if (const std::vector<Example>* own = loaded.task->own_heldout()) {
    // pairs, text: the split fixed by the file (and seed); --heldout takes its first examples.
    if (length > 0) throw ValueError("--len needs a generated task; task '" + s.task.name + "' reads its examples from " + s.task.file);
    if (own->empty()) throw IoError("run '" + run_path + "' has no held-out examples to evaluate: " + loaded.task->describe());
    std::vector<Example> examples(own->begin(), own->begin() + (count > 0 ? std::min<int64_t>(count, own->size()) : own->size()));
    return report_own_heldout(loaded, run_path, examples, examples_shown);
  }
  if (length > 0) {
    heldout = heldout_at_length(s, length, n);
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
  print_examples(*loaded.task, heldout.examples(), predictions, examples_shown);
  return kExitOk;
}

}  // namespace attnlab::cli
