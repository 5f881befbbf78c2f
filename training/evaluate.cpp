#include "training/evaluate.h"

#include <algorithm>
#include <cmath>

#include "framework/ops/loss.h"
#include "models/batch.h"

namespace attnlab {

namespace {

void check_stop(const StopCheck& stop) {
  if (stop && stop()) throw EvaluationAbandoned();
}

}  // namespace

Accuracy teacher_forced_accuracy(const Tensor& logits, const IntTensor& targets) {
  const int64_t V = logits.size(-1);
  const int64_t B = targets.shape[0], T = targets.shape[1];
  Accuracy acc;
  int64_t tokens = 0, right = 0, exact = 0;
  for (int64_t b = 0; b < B; ++b) {
    bool all = true;
    for (int64_t t = 0; t < T; ++t) {
      int32_t y = targets.data[static_cast<size_t>(b * T + t)];
      if (y == kIgnoreTarget) continue;
      const Real* row = logits.data() + (b * T + t) * V;
      int32_t best = static_cast<int32_t>(std::max_element(row, row + V) - row);
      ++tokens;
      if (best == y) ++right; else all = false;
    }
    exact += all;
  }
  acc.sequences = B;
  acc.token = tokens ? static_cast<double>(right) / static_cast<double>(tokens) : 0;
  acc.exact = B ? static_cast<double>(exact) / static_cast<double>(B) : 0;
  return acc;
}

Accuracy greedy_accuracy(SequenceModel& model, const std::vector<Example>& examples, int64_t batch_size,
                         std::vector<std::vector<int32_t>>* predictions, const StopCheck& stop) {
  const bool tagger = model.config().arch == "encoder";
  int64_t tokens = 0, right = 0, exact = 0;
  if (predictions) predictions->clear();
  for (size_t begin = 0; begin < examples.size(); begin += static_cast<size_t>(batch_size)) {
    check_stop(stop);
    size_t end = std::min(examples.size(), begin + static_cast<size_t>(batch_size));
    std::vector<std::vector<int32_t>> sources;
    size_t longest = 0;
    for (size_t i = begin; i < end; ++i) {
      sources.push_back(examples[i].input);
      longest = std::max(longest, examples[i].output.size());
    }
    auto outputs = model.greedy(sources, static_cast<int64_t>(longest) + 1);
    for (size_t i = begin; i < end; ++i) {
      const auto& want = examples[i].output;
      auto got = outputs[i - begin];
      if (tagger && got.size() > want.size()) got.resize(want.size());
      for (size_t t = 0; t < want.size(); ++t) right += t < got.size() && got[t] == want[t];
      tokens += static_cast<int64_t>(want.size());
      exact += got == want;
      if (predictions) predictions->push_back(std::move(got));
    }
  }
  Accuracy acc;
  acc.sequences = static_cast<int64_t>(examples.size());
  acc.token = tokens ? static_cast<double>(right) / static_cast<double>(tokens) : 0;
  acc.exact = acc.sequences ? static_cast<double>(exact) / static_cast<double>(acc.sequences) : 0;
  return acc;
}

LmScore lm_score(SequenceModel& model, const std::vector<Example>& windows, int64_t batch_size,
                 const StopCheck& stop) {
  InferenceGuard guard(model);
  double loss_sum = 0, right = 0;
  int64_t tokens = 0;
  for (size_t begin = 0; begin < windows.size(); begin += static_cast<size_t>(batch_size)) {
    check_stop(stop);
    const size_t end = std::min(windows.size(), begin + static_cast<size_t>(batch_size));
    TokenPairs pairs;
    for (size_t i = begin; i < end; ++i) pairs.emplace_back(windows[i].input, windows[i].output);
    FormattedBatch batch = format_batch("lm", pairs);
    Var logits = model.forward(batch.input);
    int64_t n = 0;
    for (int32_t y : batch.targets.data) n += y != kIgnoreTarget;
    // cross_entropy is the mean over the batch's targets: weigh it by their number.
    loss_sum += static_cast<double>(cross_entropy(logits, batch.targets).item()) * static_cast<double>(n);
    right += teacher_forced_accuracy(logits.value(), batch.targets).token * static_cast<double>(n);
    tokens += n;
  }
  LmScore score;
  score.tokens = tokens;
  if (tokens > 0) {
    score.loss = loss_sum / static_cast<double>(tokens);
    score.bits_per_token = score.loss / std::log(2.0);
    score.token = right / static_cast<double>(tokens);
  }
  return score;
}

bool answer_filled_table(const TransformerConfig& config, const std::vector<int32_t>& input,
                         const std::vector<int32_t>& output) {
  const auto in = static_cast<int64_t>(input.size()), out = static_cast<int64_t>(output.size());
  if (config.arch == "decoder") return in + out >= config.max_len - 1;  // [bos] input [sep] answer passed P
  if (config.arch == "seq2seq") return out >= config.max_len;
  return false;  // the tagger: one token per input position
}

std::vector<int32_t> teacher_forced_target(const TransformerConfig& config, const std::vector<int32_t>& input,
                                           const std::vector<int32_t>& output) {
  std::vector<int32_t> target = output;
  if (config.arch == "encoder") target.resize(input.size(), input.empty() ? 0 : input[0]);  // one per input position
  else if (answer_filled_table(config, input, output) && !target.empty()) target.pop_back();
  return target;
}

std::optional<HeldoutScore> score_heldout(SequenceModel& model, const std::vector<Example>& examples,
                                          bool language_model, const StopCheck& stop) {
  HeldoutScore score;
  score.language_model = language_model;
  try {
    if (language_model) {
      score.lm = lm_score(model, examples, 64, stop);
      score.accuracy = Accuracy{score.lm.token, 0, static_cast<int64_t>(examples.size())};
    } else {
      score.accuracy = greedy_accuracy(model, examples, 256, nullptr, stop);
    }
  } catch (const EvaluationAbandoned&) {
    return std::nullopt;
  }
  return score;
}

}  // namespace attnlab
