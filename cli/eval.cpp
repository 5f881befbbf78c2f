// attnlab eval: held-out metrics of a trained run.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command_line.h"
#include "cli/load_run.h"
#include "datasets/splits.h"
#include "training/evaluate.h"

namespace attnlab::cli {

namespace {

// What an evaluation found, printed as text or (--json) as one JSON object.
struct EvalReport {
  std::string run_path;
  int64_t step = 0;
  std::string evaluated;  // what the examples were, e.g. "the held-out set"
  size_t count = 0;       // examples (pairs), or characters (a language model)
  std::optional<Accuracy> accuracy;  // greedy decoding
  std::optional<LmScore> lm;         // a language model
  const Task* task = nullptr;
  const std::vector<Example>* examples = nullptr;
  std::vector<std::vector<int32_t>> predictions;
  int64_t shown = 0;
};

// The first `shown` examples with the model's answers.
void print_examples(const EvalReport& r) {
  const Task& task = *r.task;
  for (size_t i = 0; i < std::min<size_t>(static_cast<size_t>(r.shown), r.predictions.size()); ++i) {
    const Example& e = (*r.examples)[i];
    std::cout << "  " << task.to_text(e.input) << "  ->  " << task.to_text(r.predictions[i])
              << (r.predictions[i] == e.output ? "   (correct)" : "   (expected " + task.to_text(e.output) + ")")
              << "\n";
  }
}

// The in-context figures of a language model, when its windows have both parts.
bool has_in_context(const LmScore& lm) { return std::isfinite(lm.in_context_loss); }

void print_text(const EvalReport& r, bool file_task) {
  std::cout << std::fixed << std::setprecision(2) << "run " << r.run_path << " (step " << r.step << "), ";
  if (r.lm) {
    const std::string unit = r.task->token_unit();
    const bool chars = unit == "character";
    std::cout << r.count << " " << r.evaluated << "\n"
              << std::setprecision(4) << "loss               " << r.lm->loss << " nats per " << unit << "\n"
              << (chars ? "bits per character " : "bits per token     ") << r.lm->bits_per_token << "\n"
              << std::setprecision(2) << (chars ? "next-char accuracy " : "next-token accuracy ") << 100 * r.lm->token
              << "%\n";
    if (has_in_context(*r.lm))
      std::cout << std::setprecision(4) << "in-context loss    " << r.lm->in_context_loss << " nats (late "
                << r.lm->late_loss << " - early " << r.lm->early_loss << ")\n"
                << std::setprecision(2) << "late accuracy      " << 100 * r.lm->late_token << "%\n";
    return;
  }
  std::cout << r.count << (file_task ? " " : " examples, ") << r.evaluated << "\n"
            << "exact match     " << 100 * r.accuracy->exact << "%\n"
            << "token accuracy  " << 100 * r.accuracy->token << "%\n";
  print_examples(r);
}

// Fractions, not percentages, at full precision (nlohmann writes the shortest round-trip form).
void print_json(const EvalReport& r) {
  nlohmann::json out = {{"run", r.run_path}, {"step", r.step}, {"evaluated", r.evaluated}};
  if (r.lm) {
    const bool chars = r.task->token_unit() == "character";
    out[chars ? "characters" : "tokens"] = r.count;
    out["loss"] = r.lm->loss;
    out[chars ? "bits_per_character" : "bits_per_token"] = r.lm->bits_per_token;
    out[chars ? "next_char_accuracy" : "next_token_accuracy"] = r.lm->token;
    if (has_in_context(*r.lm)) {
      out["in_context_loss"] = r.lm->in_context_loss;
      out["early_loss"] = r.lm->early_loss;
      out["late_loss"] = r.lm->late_loss;
      out["late_token_accuracy"] = r.lm->late_token;
    }
  } else {
    out["examples_evaluated"] = r.count;
    out["exact_match"] = r.accuracy->exact;
    out["token_accuracy"] = r.accuracy->token;
    nlohmann::json shown = nlohmann::json::array();
    for (size_t i = 0; i < std::min<size_t>(static_cast<size_t>(r.shown), r.predictions.size()); ++i) {
      const Example& e = (*r.examples)[i];
      shown.push_back({{"input", r.task->to_text(e.input)},
                       {"answer", r.task->to_text(r.predictions[i])},
                       {"expected", r.task->to_text(e.output)},
                       {"correct", r.predictions[i] == e.output}});
    }
    out["examples"] = shown;
  }
  std::cout << out.dump() << "\n";
}

// Held-out inputs of exactly `length` tokens (digits for add), drawn as training draws its held-out set.
HeldOut heldout_at_length(const TrainSettings& s, int64_t length, int64_t n) {
  auto task = make_task(with_length(s.task, length));
  const int64_t positions = needed_positions(*task, s.model);
  if (positions > s.model.max_len)
    throw ValueError("--len " + std::to_string(length) + " needs sequences of " + std::to_string(positions) +
                     " positions; this model's positional table has " + std::to_string(s.model.max_len) +
                     " (set by --positions when it was trained)");
  return make_heldout(*task, n, derive_seed(s.seed, kHeldoutStream));
}

// Held-out metrics of a task read from a file: a language model's loss and
// bits per character, or greedy exact match over the file's held-out pairs.
void score_own_heldout(LoadedRun& loaded, EvalReport& r) {
  const Task& task = *loaded.task;
  if (task.language_model()) {
    r.lm = lm_score(*loaded.model, task, *r.examples, 64);
    r.count = static_cast<size_t>(r.lm->tokens);
    r.evaluated = "held-out characters (the end of " + task.config().file + ")";
    return;
  }
  r.accuracy = greedy_accuracy(*loaded.model, *r.examples, 256, &r.predictions);
  r.count = r.examples->size();
  r.evaluated = task.config().file.empty() ? "held-out pairs (every pair not trained on)"
                                           : "held-out pairs of " + task.config().file;
}

// The examples a report points to.
struct EvalSets {
  HeldOut heldout;
  std::vector<Example> own;
};

// Scores the run's held-out examples (count > 0: that many), or with length > 0
// generated inputs of that length, into `r`.
void score(LoadedRun& loaded, EvalReport& r, EvalSets& sets, int64_t length, int64_t count) {
  const TrainSettings& s = loaded.settings;
  if (const std::vector<Example>* own = loaded.task->own_heldout()) {
    // pairs, text: the split fixed by the file (and seed); --heldout takes its first examples.
    if (length > 0)
      throw ValueError("--len needs a generated task; task '" + s.task.name + "' " +
                       (s.task.file.empty() ? "has a fixed set of inputs" : "reads its examples from " + s.task.file));
    if (own->empty()) throw IoError("run '" + r.run_path + "' has no held-out examples to evaluate: " + loaded.task->describe());
    sets.own.assign(own->begin(), own->begin() + (count > 0 ? std::min<int64_t>(count, own->size()) : own->size()));
    r.examples = &sets.own;
    score_own_heldout(loaded, r);
    return;
  }
  const int64_t n = count > 0 ? count : s.heldout;
  sets.heldout = length > 0 ? heldout_at_length(s, length, n) : make_heldout(*loaded.task, n, derive_seed(s.seed, kHeldoutStream));
  r.evaluated = length > 0 ? "inputs of length " + std::to_string(length) : "the held-out set";
  r.examples = &sets.heldout.examples();
  if (loaded.task->language_model()) {  // repeat: windows drawn like the held-out set, scored by loss
    r.lm = lm_score(*loaded.model, *loaded.task, sets.heldout.examples(), 64);
    r.count = static_cast<size_t>(r.lm->tokens);
    r.evaluated = "held-out tokens (" + std::to_string(sets.heldout.size()) + " windows" +
                  (length > 0 ? " with sequences of length " + std::to_string(length) : "") + ")";
    return;
  }
  r.accuracy = greedy_accuracy(*loaded.model, sets.heldout.examples(), 256, &r.predictions);
  r.count = sets.heldout.size();
}

}  // namespace

int run_eval(const Args& args) {
  std::string run_path;
  int64_t length = 0, count = 0, examples_shown = 0, step = 0;
  int threads = 1;
  bool json = false;
  po::options_description opts = options_with_help("Options");
  opts.add_options()
      ("run", po::value(&run_path), "the run directory (required)")
      ("len", po::value(&length), "evaluate on inputs of exactly this length (length generalisation; add: digits per operand)")
      ("heldout", po::value(&count), "number of held-out examples (default: as trained)")
      ("step", po::value(&step), "the checkpoint to evaluate (default: the latest)")
      ("examples", po::value(&examples_shown)->default_value(0), "print this many examples with the model's answers")
      ("threads", po::value(&threads)->default_value(1), "OpenMP threads")
      ("json", po::bool_switch(&json), "print the figures (fractions, full precision) and the --examples as one JSON object");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm,
                          "usage: attnlab eval --run DIR [options]\n\n"
                          "Greedy-decodes held-out examples with the run's latest checkpoint and\n"
                          "prints token accuracy and exact match. With --len N the examples have\n"
                          "inputs of length N, which may lie outside the training lengths (they\n"
                          "must fit the model's positional table). Each answer is decoded as\n"
                          "predict decodes its input: until <eos>, one token past its expected\n"
                          "answer, or the end of the positional table (P = --positions at\n"
                          "training: a decoder reads [bos] INPUT [sep] ANSWER, so input + answer\n"
                          "<= P - 1 tokens; seq2seq answers at most P tokens), whichever comes\n"
                          "first.\n\n",
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
  EvalReport r;
  r.run_path = run_path;
  r.step = loaded.step;
  r.task = loaded.task.get();
  r.shown = examples_shown;
  EvalSets sets;
  score(loaded, r, sets, length, count);
  if (json) print_json(r);
  else print_text(r, loaded.task->own_heldout() != nullptr);
  return kExitOk;
}

}  // namespace attnlab::cli
