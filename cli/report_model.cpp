// The report's views of what a trained model does: attention maps for a few
// inputs and held-out examples with its answers (cli/report_data.h).
#include <algorithm>
#include <charconv>
#include <string>

#include "cli/attention_reading.h"
#include "cli/report_data.h"
#include "datasets/splits.h"
#include "training/evaluate.h"

namespace attnlab::cli {

namespace {

constexpr size_t kHeldoutMaps = 3;      // held-out examples whose attention is drawn
constexpr size_t kScoredExamples = 200;  // held-out examples decoded to find right and wrong answers
constexpr size_t kShownPerKind = 6;      // right ones shown, and wrong ones

// The float's shortest decimal form as a double, so the JSON holds "0.1", not
// "0.10000000149011612", and still reads back as the same float.
double short_float(float value) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  double out = 0;
  std::from_chars(buf, end, out);
  return out;
}

std::vector<Example> heldout_examples(const LoadedRun& loaded, size_t n) {
  std::vector<Example> all;
  if (const std::vector<Example>* own = loaded.task->own_heldout()) all = *own;
  else all = make_heldout(*loaded.task, loaded.settings.heldout, derive_seed(loaded.settings.seed, kHeldoutStream)).examples();
  if (all.size() > n) all.resize(n);
  return all;
}

// Weights (1, h, T_q, T_k) as [head][query][key].
nlohmann::json head_weights(const Tensor& w) {
  const int64_t h = w.size(1), t_q = w.size(2), t_k = w.size(3);
  nlohmann::json heads = nlohmann::json::array();
  for (int64_t head = 0; head < h; ++head) {
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t i = 0; i < t_q; ++i) {
      nlohmann::json row = nlohmann::json::array();
      for (int64_t j = 0; j < t_k; ++j) row.push_back(short_float(w[((head * t_q) + i) * t_k + j]));
      rows.push_back(std::move(row));
    }
    heads.push_back(std::move(rows));
  }
  return heads;
}

// Every layer's maps for one input, as `attnlab attention` computes them.
nlohmann::json attention_for(LoadedRun& loaded, const std::string& text, const std::string& source) {
  const Task& task = *loaded.task;
  SequenceModel& model = *loaded.model;
  const BatchFormat format = batch_format(model.config().arch, task.language_model());
  const Reading reading = task.language_model() ? read_text(loaded, text) : read_sequence_task(loaded, text);
  const auto src = token_texts(task, reading.batch.input.src), tgt = token_texts(task, reading.batch.input.tgt_in);
  nlohmann::json entry = {{"source", source}, {"input", task.to_text(reading.input)},
                          {"output", task.to_text(reading.output)}, {"layers", nlohmann::json::array()}};
  OutputFiles unused;  // the CSV text `attention` writes; the page takes the weights themselves
  for (auto& [name, mha] : capture_attention(model, reading.batch)) {
    nlohmann::json layer = layer_maps(name, *mha, format, src, tgt, unused);
    layer.erase("files");
    layer["weights"] = head_weights(mha->last_weights());
    entry["layers"].push_back(std::move(layer));
  }
  return entry;
}

nlohmann::json example_entry(const Task& task, const Example& e, const std::vector<int32_t>& answer,
                             const std::vector<int32_t>& expected) {
  return {{"input", task.to_text(e.input)}, {"output", task.to_text(answer)}, {"expected", task.to_text(expected)},
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

nlohmann::json model_views(LoadedRun& loaded, const std::vector<std::string>& inputs) {
  const bool lm = loaded.task->language_model();
  const std::vector<Example> examples = heldout_examples(loaded, lm ? kShownPerKind * 2 : kScoredExamples);
  nlohmann::json attention = nlohmann::json::array();
  for (size_t i = 0; i < std::min(kHeldoutMaps, examples.size()); ++i)
    attention.push_back(attention_for(loaded, loaded.task->to_text(examples[i].input), "held-out"));
  for (const std::string& text : inputs) attention.push_back(attention_for(loaded, text, "--input"));
  return {{"attention", attention}, {"examples", answered_examples(loaded, examples)}};
}

}  // namespace attnlab::cli
