// attnlab predict: the trained model's greedy answer for one input.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "cli/command_line.h"
#include "cli/load_run.h"
#include "framework/ops/softmax.h"
#include "models/batch.h"
#include "training/evaluate.h"

namespace attnlab::cli {

namespace {

// Each predicted position's most likely tokens, from a teacher-forced pass
// over the greedy answer (the same distributions greedy decoding saw).
void print_probabilities(SequenceModel& model, const Task& task, const std::vector<int32_t>& input,
                         const std::vector<int32_t>& output, int64_t top) {
  const std::string& arch = model.config().arch;
  const std::vector<int32_t> target = teacher_forced_target(model.config(), input, output);
  FormattedBatch batch = format_batch(arch, {{input, target}});
  InferenceGuard guard(model);
  Var probs = softmax(model.forward(batch.input));  // (1, T, V)
  const int64_t V = probs.size(-1), T = batch.targets.shape[1];
  int64_t k = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (batch.targets.data[static_cast<size_t>(t)] == kIgnoreTarget) continue;
    const Real* p = probs.value().data() + t * V;
    std::vector<int32_t> order(static_cast<size_t>(V));
    for (int32_t i = 0; i < V; ++i) order[static_cast<size_t>(i)] = i;
    std::partial_sort(order.begin(), order.begin() + std::min<int64_t>(top, V), order.end(),
                      [p](int32_t a, int32_t b) { return p[a] > p[b]; });
    std::cout << "  position " << k++ << ":";
    for (int64_t j = 0; j < std::min<int64_t>(top, V); ++j)
      std::cout << "  " << task.token_text(order[static_cast<size_t>(j)]) << " " << std::fixed << std::setprecision(3)
                << p[order[static_cast<size_t>(j)]];
    std::cout << "\n";
  }
}

}  // namespace

int run_predict(const Args& args) {
  RunInputArgs in;
  bool logits = false;
  int64_t top = 3;
  po::options_description opts = options_with_help("Options");
  po::positional_options_description positional;
  add_run_input_options(opts, positional, in);
  opts.add_options()
      ("logits", po::bool_switch(&logits), "print each output position's most likely tokens and their probabilities")
      ("top", po::value(&top)->default_value(3), "with --logits: how many tokens per position");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm,
                          "usage: attnlab predict --run DIR [--logits] \"INPUT\"\n\n"
                          "Prints the trained model's greedy answer for one input, and the correct answer.\n"
                          "Symbols are written as in `attnlab tasks` (e.g. \"3 1 4 1 5\"; add: \"123+456\").\n"
                          "The answer is decoded greedily until <eos> or the end of the positional table (P =\n"
                          "--positions at training): a decoder reads [bos] INPUT [sep] ANSWER, so input + answer\n"
                          "<= P - 1 tokens; seq2seq answers at most P tokens; the encoder tagger gives one token\n"
                          "per input position. An answer cut by the table gets a note on stderr.\n\n",
                          "\nexample:\n  attnlab predict --run runs/rev \"3 1 4 1 5 9 2 6\"\n", &positional))
    return kExitOk;
  check_run_input(vm, in, "predict");
  if (top < 1) throw ValueError("--top must be >= 1, got " + std::to_string(top));
  omp_set_num_threads(1);

  LoadedRun loaded = load_run(RunDir(in.run_path), in.step);
  if (loaded.task->language_model())
    throw ValueError("run '" + in.run_path + "' is a language model (task " + loaded.settings.task.name +
                     "); continue a prompt with: attnlab sample --run " + in.run_path + " --prompt TEXT");
  std::vector<int32_t> input = parse_input(loaded, in.input_text);
  auto output = loaded.model->greedy({input}, loaded.model->config().max_len)[0];
  if (answer_filled_table(loaded.model->config(), input, output)) note_answer_filled_table(loaded.model->config());
  if (loaded.model->config().arch == "encoder") {
    auto expected_len = loaded.task->solve(input).size();
    if (output.size() > expected_len) output.resize(expected_len);
  }
  std::cout << loaded.task->to_text(output) << "\n";
  try {
    auto expected = loaded.task->solve(input);
    std::cout << (expected == output ? "(correct)" : "(expected " + loaded.task->to_text(expected) + ")") << "\n";
  } catch (const ValueError&) {
    // An input the task itself cannot answer: nothing to compare with.
  }
  if (logits) print_probabilities(*loaded.model, *loaded.task, input, output, top);
  return kExitOk;
}

}  // namespace attnlab::cli
