// attnlab predict: the trained model's greedy answer for one input.
#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command_line.h"
#include "cli/load_run.h"
#include "framework/ops/softmax.h"
#include "models/batch.h"
#include "training/evaluate.h"

namespace attnlab::cli {

namespace {

// One decoded position: the token greedy decoding chose there and the
// model's distribution it chose from.
struct DecodedPosition {
  int32_t token = 0;
  std::vector<Real> probs;  // (V)
};

// Each predicted position's distribution, from a teacher-forced pass over the
// greedy answer (the same distributions greedy decoding saw). The position
// after the answer is the <eos> decoding stopped at (decoder, seq2seq).
std::vector<DecodedPosition> decoded_positions(SequenceModel& model, const std::vector<int32_t>& input,
                                               const std::vector<int32_t>& output, int64_t budget) {
  FormattedBatch batch = teacher_forced_batch(model.config(), input, output, budget);
  InferenceGuard guard(model);
  Var probs = softmax(model.forward(batch.input));  // (1, T, V)
  const int64_t V = probs.size(-1), T = batch.targets.shape[1];
  std::vector<DecodedPosition> out;
  for (int64_t t = 0; t < T; ++t) {
    if (batch.targets.data[static_cast<size_t>(t)] == kIgnoreTarget) continue;
    const Real* p = probs.value().data() + t * V;
    const size_t k = out.size();
    out.push_back({k < output.size() ? output[k] : kEos, std::vector<Real>(p, p + V)});
  }
  return out;
}

void print_probabilities(const Task& task, const std::vector<DecodedPosition>& positions, int64_t top) {
  for (size_t k = 0; k < positions.size(); ++k) {
    const std::vector<Real>& p = positions[k].probs;
    const int64_t V = static_cast<int64_t>(p.size()), shown = std::min<int64_t>(top, V);
    std::vector<int32_t> order(static_cast<size_t>(V));
    for (int32_t i = 0; i < V; ++i) order[static_cast<size_t>(i)] = i;
    std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                      [&p](int32_t a, int32_t b) { return p[a] > p[b]; });
    std::cout << "  position " << k << ":";
    for (int64_t j = 0; j < shown; ++j)
      std::cout << "  " << task.token_text(order[static_cast<size_t>(j)]) << " " << std::fixed << std::setprecision(3)
                << p[order[static_cast<size_t>(j)]];
    std::cout << "\n";
  }
}

// The shortest decimal that reads back as the same float, as a JSON number
// (a float widened to double would print 0.10000000149011612 for 0.1f).
nlohmann::json shortest(Real v) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

nlohmann::json sequence_json(const Task& task, const std::vector<int32_t>& ids) {
  return {{"text", task.to_text(ids)}, {"ids", ids}};
}

struct Prediction {
  std::vector<int32_t> input, output;
  std::optional<std::vector<int32_t>> expected;  // none: an input the task cannot answer
  int64_t budget = 0;                            // decoding_budget: the plan of the decoding
  bool filled_table = false;
  bool spent_budget = false;
};

void print_json(const Task& task, const Prediction& p, const std::vector<DecodedPosition>& positions) {
  nlohmann::json vocabulary = nlohmann::json::array();
  for (int32_t id = 0; id < task.vocab_size(); ++id) vocabulary.push_back(task.token_text(id));
  nlohmann::json decoded = nlohmann::json::array();
  for (size_t k = 0; k < positions.size(); ++k) {
    nlohmann::json probs = nlohmann::json::array();
    for (Real v : positions[k].probs) probs.push_back(shortest(v));
    decoded.push_back({{"position", k},
                       {"token", positions[k].token},
                       {"token_text", task.token_text(positions[k].token)},
                       {"probabilities", probs}});
  }
  nlohmann::json out = {{"input", sequence_json(task, p.input)},
                        {"answer", sequence_json(task, p.output)},
                        {"expected", p.expected ? sequence_json(task, *p.expected) : nlohmann::json()},
                        {"correct", p.expected ? nlohmann::json(*p.expected == p.output) : nlohmann::json()},
                        {"filled_table", p.filled_table},
                        {"vocabulary", vocabulary},
                        {"positions", decoded}};
  std::cout << out.dump() << "\n";
}

// Decoded as eval decodes a held-out input (decoding_budget, training/evaluate.h),
// so the two give the same answer for it.
Prediction predict(LoadedRun& loaded, const std::string& text) {
  const TransformerConfig& config = loaded.model->config();
  Prediction p;
  p.input = parse_input(loaded, text);
  try {
    p.expected = loaded.task->solve(p.input);
  } catch (const ValueError&) {
    // An input the task itself cannot answer: nothing to compare with.
  }
  p.budget = decoding_budget(*loaded.task, p.input, config);
  p.output = loaded.model->greedy({p.input}, p.budget)[0];
  p.filled_table = answer_filled_table(config, p.input, p.output);
  p.spent_budget = !p.filled_table && answer_spent_budget(config, p.output, p.budget);
  if (config.arch == Arch::encoder) {  // one token per input position, cut to the answer's length (solve's error if none)
    const size_t expected_len = loaded.task->solve(p.input).size();
    if (p.output.size() > expected_len) p.output.resize(expected_len);
  }
  return p;
}

}  // namespace

int run_predict(const Args& args) {
  RunInputArgs in;
  bool logits = false, json = false;
  int64_t top = 3;
  po::options_description opts = options_with_help("Options");
  po::positional_options_description positional;
  add_run_input_options(opts, positional, in);
  opts.add_options()
      ("logits", po::bool_switch(&logits), "print each output position's most likely tokens and their probabilities")
      ("top", po::value(&top)->default_value(3), "with --logits: how many tokens per position")
      ("json", po::bool_switch(&json),
       "print one JSON object: input, answer and expected answer (text and ids), and every decoded position's chosen "
       "token and full probability vector (shortest round-trip floats)");
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm,
                          "usage: attnlab predict --run DIR [--logits | --json] \"INPUT\"\n\n"
                          "Prints the trained model's greedy answer for one input, and the correct\n"
                          "answer. Symbols are written as in `attnlab tasks` (e.g. \"3 1 4 1 5\";\n"
                          "add: \"123+456\"). The input is decoded as eval decodes a held-out one,\n"
                          "so both give the same answer: until <eos>, one token past the expected\n"
                          "answer, or the end of the positional table (P = --positions at\n"
                          "training): a decoder reads [bos] INPUT [sep] ANSWER, so input + answer\n"
                          "<= P - 1 tokens; seq2seq answers at most P tokens; the encoder tagger\n"
                          "gives one token per input position. An answer cut before <eos> gets a\n"
                          "note on stderr, and so does an input unlike those of training.\n\n",
                          "\nexample:\n  attnlab predict --run runs/rev \"3 1 4 1 5 9 2 6\"\n", &positional))
    return kExitOk;
  check_run_input(vm, in, "predict");
  if (top < 1) throw ValueError("--top must be >= 1, got " + std::to_string(top));
  if (!json && !logits && !vm["top"].defaulted())
    throw ValueError("--top " + std::to_string(top) + " applies to --logits (tokens shown per position); add --logits");
  if (json && (logits || !vm["top"].defaulted()))
    throw ValueError(std::string("--json prints every position's full probability vector; drop --") +
                     (logits ? "logits" : "top"));
  omp_set_num_threads(1);

  LoadedRun loaded = load_run(RunDir(in.run_path), in.step);
  if (loaded.task->language_model())
    throw ValueError("run '" + in.run_path + "' is a language model (task " + loaded.settings.task.name +
                     "); continue a prompt with: attnlab sample --run " + in.run_path + " --prompt TEXT");
  const Prediction p = predict(loaded, in.input_text);
  if (p.filled_table) note_answer_filled_table(loaded.model->config());
  if (p.spent_budget) note_answer_spent_budget(p.budget);
  if (json) {
    print_json(*loaded.task, p, decoded_positions(*loaded.model, p.input, p.output, p.budget));
    return kExitOk;
  }
  std::cout << loaded.task->to_text(p.output) << "\n";
  if (p.expected)
    std::cout << (*p.expected == p.output ? "(correct)" : "(expected " + loaded.task->to_text(*p.expected) + ")") << "\n";
  if (logits) print_probabilities(*loaded.task, decoded_positions(*loaded.model, p.input, p.output, p.budget), top);
  return kExitOk;
}

}  // namespace attnlab::cli
