// The report's views of what a trained model does: attention maps for a few
// inputs and held-out examples with its answers (cli/report_data.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/ablate.h"
#include "cli/attention_reading.h"
#include "cli/report_data.h"
#include "cli/report_lens.h"
#include "datasets/splits.h"
#include "training/evaluate.h"

namespace attnlab::cli {

namespace {

constexpr size_t kHeldoutMaps = 3;      // held-out examples whose attention is drawn
constexpr size_t kScoredExamples = 200;  // held-out examples decoded to find right and wrong answers
constexpr size_t kShownPerKind = 6;      // right ones shown, and wrong ones

std::vector<Example> heldout_examples(const LoadedRun& loaded, size_t n) {
  std::vector<Example> all;
  if (const std::vector<Example>* own = loaded.task->own_heldout()) all = *own;
  else all = make_heldout(*loaded.task, loaded.settings.heldout, derive_seed(loaded.settings.seed, kHeldoutStream)).examples();
  if (all.size() > n) all.resize(n);
  return all;
}

// A weight in [0, 1] as 16 bits: round(w * 65535), at most 7.7e-6 from w.
constexpr double kWeightScale = 65535.0;

// Bytes as base64 (RFC 4648, with padding), which the page decodes with atob().
std::string base64(const std::vector<uint8_t>& bytes) {
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = uint32_t(bytes[i]) << 16 | (i + 1 < bytes.size() ? uint32_t(bytes[i + 1]) << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t(bytes[i + 2]) : 0);
    out += digits[n >> 18 & 63];
    out += digits[n >> 12 & 63];
    out += i + 1 < bytes.size() ? digits[n >> 6 & 63] : '=';
    out += i + 2 < bytes.size() ? digits[n & 63] : '=';
  }
  return out;
}

// Weights (1, h, T_q, T_k) as {"rows": T_q, "cols": T_k, "heads": [base64 per head]}, each
// head its T_q x T_k weights row by row as little-endian uint16 of round(w * 65535): a
// sixth of the size of decimal text, which an L-sized model's maps (4 x 48 heads x 64 x 64)
// would otherwise make the bulk of the page.
nlohmann::json head_weights(const Tensor& w) {
  const int64_t h = w.size(1), t_q = w.size(2), t_k = w.size(3);
  nlohmann::json heads = nlohmann::json::array();
  std::vector<uint8_t> bytes(static_cast<size_t>(2 * t_q * t_k));
  for (int64_t head = 0; head < h; ++head) {
    for (int64_t k = 0; k < t_q * t_k; ++k) {
      const double v = std::clamp(static_cast<double>(w[head * t_q * t_k + k]), 0.0, 1.0);
      const auto q = static_cast<uint16_t>(std::lround(v * kWeightScale));
      bytes[2 * k] = static_cast<uint8_t>(q & 0xff);
      bytes[2 * k + 1] = static_cast<uint8_t>(q >> 8);
    }
    heads.push_back(base64(bytes));
  }
  return {{"rows", t_q}, {"cols", t_k}, {"scale", kWeightScale}, {"heads", heads}};
}

// Each token of `ids` as the task writes it (the page compares answers token by token).
nlohmann::json tokens_json(const Task& task, const std::vector<int32_t>& ids) {
  nlohmann::json out = nlohmann::json::array();
  for (int32_t id : ids) out.push_back(task.token_text(id));
  return out;
}

// The notes `attnlab predict` prints on stderr for a sequence task's input
// and its greedy answer: an input unlike those of training, an answer that
// filled the positional table or spent its decoding budget.
nlohmann::json predict_notes(const LoadedRun& loaded, const std::vector<int32_t>& input,
                             const std::vector<int32_t>& answer) {
  const TransformerConfig& config = loaded.model->config();
  nlohmann::json notes = nlohmann::json::array();
  if (std::string note = input_shape_note(loaded, input); !note.empty()) notes.push_back(note);
  const int64_t budget = decoding_budget(*loaded.task, input, config);
  if (answer_filled_table(config, input, answer)) notes.push_back(answer_filled_table_note(config));
  else if (answer_spent_budget(config, answer, budget)) notes.push_back(answer_spent_budget_note(budget));
  return notes;
}

// An answer beside the expected one, as `attnlab predict` prints them: the
// expected answer (task->solve; null for an input the task cannot answer or
// a language model's), whether they agree, the tokens of both, and predict's
// notes (predict_notes; none for a language model).
nlohmann::json answer_json(const LoadedRun& loaded, const std::vector<int32_t>& input, std::vector<int32_t> answer) {
  const Task& task = *loaded.task;
  if (task.language_model())
    return {{"output", task.to_text(answer)}, {"output_tokens", tokens_json(task, answer)}, {"expected", nullptr},
            {"expected_tokens", nullptr}, {"correct", nullptr}, {"notes", nlohmann::json::array()}};
  std::optional<std::vector<int32_t>> expected;
  try {
    expected = task.solve(input);
  } catch (const ValueError&) {
    // An input the task itself cannot answer: nothing to compare with.
  }
  const nlohmann::json notes = predict_notes(loaded, input, answer);
  // The encoder tagger gives one token per input position, cut to the answer's length (predict).
  if (expected && loaded.model->config().arch == Arch::encoder && answer.size() > expected->size())
    answer.resize(expected->size());
  return {{"output", task.to_text(answer)},
          {"output_tokens", tokens_json(task, answer)},
          {"expected", expected ? nlohmann::json(task.to_text(*expected)) : nlohmann::json()},
          {"expected_tokens", expected ? tokens_json(task, *expected) : nlohmann::json()},
          {"correct", expected ? nlohmann::json(*expected == answer) : nlohmann::json()},
          {"notes", notes}};
}

// Every layer's maps for one input, as `attnlab attention` computes them,
// with the model's answer beside the expected one (answer_json).
nlohmann::json attention_for(LoadedRun& loaded, const std::string& text, const std::string& source) {
  const Task& task = *loaded.task;
  SequenceModel& model = *loaded.model;
  const BatchFormat format = batch_format(model.config(), task.language_model());
  const Reading reading = task.language_model() ? read_text(loaded, text) : read_sequence_task(loaded, text);
  const auto src = token_texts(task, reading.batch.input.src), tgt = token_texts(task, reading.batch.input.tgt_in);
  nlohmann::json entry = answer_json(loaded, reading.input, reading.output);
  entry.update({{"source", source}, {"input", task.to_text(reading.input)}, {"layers", nlohmann::json::array()}});
  OutputFiles unused;  // the CSV text `attention` writes; the page takes the weights themselves
  for (auto& [name, weights] : capture_attention(model, reading.batch)) {
    nlohmann::json layer = layer_maps(name, weights, format, src, tgt, unused);
    layer.erase("files");
    layer["weights"] = head_weights(weights);
    entry["layers"].push_back(std::move(layer));
  }
  return entry;
}

nlohmann::json example_entry(const Task& task, const Example& e, const std::vector<int32_t>& answer,
                             const std::vector<int32_t>& expected) {
  return {{"input", task.to_text(e.input)}, {"output", task.to_text(answer)}, {"expected", task.to_text(expected)},
          {"output_tokens", tokens_json(task, answer)}, {"expected_tokens", tokens_json(task, expected)},
          {"correct", answer == expected}};
}

// Up to kShownPerKind right and kShownPerKind wrong answers among the first
// held-out examples (a language model: its next character after each window).
nlohmann::json answered_examples(LoadedRun& loaded, const std::vector<Example>& examples) {
  const Task& task = *loaded.task;
  std::vector<std::vector<int32_t>> answers, expected;
  if (task.language_model()) {
    for (const Example& e : examples) {
      answers.push_back(read_text(loaded, task.to_text(e.input)).output);
      expected.push_back({e.output.back()});
    }
  } else {
    greedy_accuracy(*loaded.model, examples, 256, &answers);
    for (const Example& e : examples) expected.push_back(e.output);
  }
  nlohmann::json right = nlohmann::json::array(), wrong = nlohmann::json::array();
  for (size_t i = 0; i < examples.size(); ++i) {
    nlohmann::json& kind = answers[i] == expected[i] ? right : wrong;
    if (kind.size() < kShownPerKind) kind.push_back(example_entry(task, examples[i], answers[i], expected[i]));
  }
  for (auto& e : wrong) right.push_back(std::move(e));
  return {{"scored", examples.size()}, {"shown", right}};
}

}  // namespace

nlohmann::json model_views(LoadedRun& loaded, const std::vector<std::string>& inputs, const PatchTexts& patch_pairs) {
  const bool lm = loaded.task->language_model();
  const std::vector<Example> examples = heldout_examples(loaded, lm ? kShownPerKind * 2 : kScoredExamples);
  nlohmann::json attention = nlohmann::json::array();
  for (size_t i = 0; i < std::min(kHeldoutMaps, examples.size()); ++i)
    attention.push_back(attention_for(loaded, loaded.task->to_text(examples[i].input), "held-out"));
  for (const std::string& text : inputs) attention.push_back(attention_for(loaded, text, "--input"));
  nlohmann::json views = {{"attention", attention}, {"examples", answered_examples(loaded, examples)},
                          {"interventions", nlohmann::json::object()}};
  views["interventions"]["ablation"] = ablation_view_data(loaded);
  views["interventions"]["lens"] = lens_report_data(loaded, attention);
  if (!patch_pairs.empty()) views["interventions"]["patching"] = patching_views(loaded, patch_pairs);
  return views;
}

}  // namespace attnlab::cli
