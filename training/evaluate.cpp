#include "training/evaluate.h"

#include <algorithm>
#include <cmath>

#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/positions.h"

namespace attnlab {

namespace {

void check_stop(const StopCheck& stop) {
  if (stop && stop()) throw EvaluationAbandoned();
}

// The cross-entropy of target (b, t) under logits (B, T, V), in double: log
// of the row's sum of exponentials less the target's logit.
double target_loss(const Tensor& logits, int64_t row, int32_t target) {
  const int64_t V = logits.size(-1);
  const Real* x = logits.data() + row * V;
  const double top = *std::max_element(x, x + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(x[v]) - top);
  return top + std::log(sum) - static_cast<double>(x[target]);
}

bool argmax_is(const Tensor& logits, int64_t row, int32_t target) {
  const int64_t V = logits.size(-1);
  const Real* x = logits.data() + row * V;
  return std::max_element(x, x + V) - x == target;
}

// The summed loss and count of every target of `batch` (-100 ignored), from
// a forward pass without a graph.
void add_teacher_forced_loss(SequenceModel& model, const FormattedBatch& batch, BatchFigures& f) {
  NoGradGuard no_grad;
  const Tensor logits = model.forward(batch.input).value();  // (B, T, V)
  for (size_t i = 0; i < batch.targets.data.size(); ++i) {
    const int32_t y = batch.targets.data[i];
    if (y == kIgnoreTarget) continue;
    f.loss += target_loss(logits, static_cast<int64_t>(i), y);
    ++f.loss_tokens;
  }
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

BatchFigures greedy_batch(SequenceModel& model, const std::vector<Example>& examples, size_t begin, size_t end,
                          std::vector<std::vector<int32_t>>* predictions) {
  const bool tagger = model.config().arch == Arch::encoder;
  std::vector<std::vector<int32_t>> sources;
  std::vector<int64_t> budgets;  // each planned on its own answer, whatever else is in the batch
  for (size_t i = begin; i < end; ++i) {
    sources.push_back(examples[i].input);
    budgets.push_back(decoding_budget(examples[i].output.size(), model.config()));
  }
  auto outputs = model.greedy(sources, budgets);
  BatchFigures f;
  {
    TokenPairs pairs;
    for (size_t i = begin; i < end; ++i) pairs.emplace_back(examples[i].input, examples[i].output);
    InferenceGuard guard(model);
    add_teacher_forced_loss(model, format_batch(batch_format(model.config(), false), pairs), f);
  }
  int64_t tokens = 0, right = 0, exact = 0;
  for (size_t i = begin; i < end; ++i) {
    const auto& want = examples[i].output;
    auto got = outputs[i - begin];
    if (tagger && got.size() > want.size()) got.resize(want.size());
    for (size_t t = 0; t < want.size(); ++t) right += t < got.size() && got[t] == want[t];
    tokens += static_cast<int64_t>(want.size());
    exact += got == want;
    if (predictions) predictions->push_back(std::move(got));
  }
  f.right = static_cast<double>(right);
  f.tokens = static_cast<double>(tokens);
  f.exact = static_cast<double>(exact);
  return f;
}

Accuracy greedy_accuracy(SequenceModel& model, const std::vector<Example>& examples, int64_t batch_size,
                         std::vector<std::vector<int32_t>>* predictions, const StopCheck& stop) {
  if (predictions) predictions->clear();
  std::vector<BatchFigures> batches;
  for (size_t begin = 0; begin < examples.size(); begin += static_cast<size_t>(batch_size)) {
    check_stop(stop);
    batches.push_back(greedy_batch(model, examples, begin, std::min(examples.size(), begin + static_cast<size_t>(batch_size)),
                                   predictions));
  }
  return greedy_totals(batches, static_cast<int64_t>(examples.size()));
}

Accuracy greedy_totals(const std::vector<BatchFigures>& batches, int64_t sequences) {
  int64_t tokens = 0, right = 0, exact = 0;  // counts: exact in any order
  for (const BatchFigures& b : batches) {
    right += static_cast<int64_t>(b.right);
    tokens += static_cast<int64_t>(b.tokens);
    exact += static_cast<int64_t>(b.exact);
  }
  Accuracy acc;
  acc.sequences = sequences;
  acc.token = tokens ? static_cast<double>(right) / static_cast<double>(tokens) : 0;
  acc.exact = acc.sequences ? static_cast<double>(exact) / static_cast<double>(acc.sequences) : 0;
  return acc;
}

BatchFigures lm_batch(SequenceModel& model, const Task& task, const std::vector<Example>& windows, size_t begin,
                      size_t end) {
  TokenPairs pairs;
  for (size_t i = begin; i < end; ++i) pairs.emplace_back(windows[i].input, windows[i].output);
  const FormattedBatch batch = format_batch(BatchFormat::lm, pairs);
  NoGradGuard no_grad;
  const Tensor logits = model.forward(batch.input).value();  // (B, T, V)
  const int64_t T = batch.targets.shape[1];
  BatchFigures f;
  for (size_t i = begin; i < end; ++i) {
    const int64_t b = static_cast<int64_t>(i - begin), n = static_cast<int64_t>(windows[i].output.size());
    const ContextSplit split = task.in_context_split(n);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t row = b * T + t;
      const int32_t y = batch.targets.data[static_cast<size_t>(row)];
      const double loss = target_loss(logits, row, y);
      const bool right = argmax_is(logits, row, y);
      f.loss += loss;
      f.right += right;
      if (t < split.early_end) {
        f.early_loss += loss;
        ++f.early_tokens;
      } else if (t >= split.late_begin) {
        f.late_loss += loss;
        ++f.late_tokens;
        f.late_right += right;
      }
    }
    f.tokens += static_cast<double>(n);
  }
  f.loss_tokens = f.tokens;
  return f;
}

LmScore lm_score(SequenceModel& model, const Task& task, const std::vector<Example>& windows, int64_t batch_size,
                 const StopCheck& stop) {
  InferenceGuard guard(model);
  std::vector<BatchFigures> batches;
  for (size_t begin = 0; begin < windows.size(); begin += static_cast<size_t>(batch_size)) {
    check_stop(stop);
    batches.push_back(
        lm_batch(model, task, windows, begin, std::min(windows.size(), begin + static_cast<size_t>(batch_size))));
  }
  return lm_totals(batches);
}

LmScore lm_totals(const std::vector<BatchFigures>& batches) {
  BatchFigures sum;  // in batch order: the sums are of doubles
  for (const BatchFigures& b : batches) {
    sum.loss += b.loss;
    sum.right += b.right;
    sum.tokens += b.tokens;
    sum.early_loss += b.early_loss;
    sum.early_tokens += b.early_tokens;
    sum.late_loss += b.late_loss;
    sum.late_tokens += b.late_tokens;
    sum.late_right += b.late_right;
  }
  LmScore score;
  score.tokens = static_cast<int64_t>(sum.tokens);
  if (sum.tokens > 0) {
    score.loss = sum.loss / sum.tokens;
    score.bits_per_token = score.loss / std::log(2.0);
    score.token = sum.right / sum.tokens;
  }
  if (sum.early_tokens > 0) score.early_loss = sum.early_loss / sum.early_tokens;
  if (sum.late_tokens > 0) {
    score.late_loss = sum.late_loss / sum.late_tokens;
    score.late_token = sum.late_right / sum.late_tokens;
  }
  score.in_context_loss = score.late_loss - score.early_loss;  // NaN unless both are there
  return score;
}

double teacher_forced_loss(const std::vector<BatchFigures>& batches) {
  double loss = 0, tokens = 0;
  for (const BatchFigures& b : batches) {
    loss += b.loss;
    tokens += b.loss_tokens;
  }
  return tokens > 0 ? loss / tokens : kNaN;
}

int64_t decoding_budget(size_t expected_answer_tokens, const TransformerConfig& config) {
  const bool bare = batch_format(config, false) == BatchFormat::bare;  // no <eos> to decode
  return static_cast<int64_t>(expected_answer_tokens) + (bare ? 0 : 1);
}

int64_t decoding_budget(const Task& task, const std::vector<int32_t>& input, const TransformerConfig& config) {
  try {
    return decoding_budget(task.solve(input).size(), config);
  } catch (const ValueError&) {  // an input the task cannot answer
    return decoding_budget(static_cast<size_t>(std::max<int64_t>(0, task.max_output_len())), config);
  }
}

bool answer_spent_budget(const TransformerConfig& config, const std::vector<int32_t>& output, int64_t budget) {
  return answers_end_with_eos(batch_format(config, false)) && static_cast<int64_t>(output.size()) >= budget;
}

bool answer_filled_table(const TransformerConfig& config, const std::vector<int32_t>& input,
                         const std::vector<int32_t>& output) {
  const auto in = static_cast<int64_t>(input.size()), out = static_cast<int64_t>(output.size());
  if (batch_format(config, false) == BatchFormat::bare) return in + out > config.max_len;  // input answer passed P
  if (config.arch == Arch::decoder) return in + out >= config.max_len - 1;  // [bos] input [sep] answer passed P
  if (config.arch == Arch::seq2seq) return out >= config.max_len;
  return false;  // the tagger: one token per input position
}

std::vector<int32_t> teacher_forced_target(const TransformerConfig& config, const std::vector<int32_t>& input,
                                           const std::vector<int32_t>& output, int64_t budget) {
  std::vector<int32_t> target = output;
  if (config.arch == Arch::encoder) target.resize(input.size(), input.empty() ? 0 : input[0]);  // one per input position
  else if (batch_format(config, false) == BatchFormat::bare) return target;  // no <eos>: every token decoding read
  else if ((answer_filled_table(config, input, output) || answer_spent_budget(config, output, budget)) &&
           !target.empty())
    target.pop_back();
  return target;
}

FormattedBatch teacher_forced_batch(const TransformerConfig& config, const std::vector<int32_t>& input,
                                    const std::vector<int32_t>& output, int64_t budget) {
  const BatchFormat format = batch_format(config, false);
  FormattedBatch batch = format_batch(format, {{input, teacher_forced_target(config, input, output, budget)}});
  if (config.arch == Arch::encoder) return batch;  // its positions are the forward's own
  const int64_t prompt = prompt_length(format, input.size());
  const std::vector<std::vector<int32_t>> table = {decoding_positions(config, prompt, budget - 1)};
  batch.input.tgt_pos = prefix_position_ids(table, {0}, batch.input.tgt_in.shape[1]);
  return batch;
}

namespace {

// A data-parallel evaluation: batch b goes to process b mod N, and every
// process takes part in ceil(batches / N) rounds (the stop check is
// collective, so each asks it as often). The gathered figures come back in
// batch order, so the totals are those of one process scoring every batch.
std::vector<BatchFigures> split_batches(SequenceModel& model, const Task& task, const std::vector<Example>& examples,
                                        const StopCheck& stop, const Communicator& comm) {
  const bool language_model = task.language_model();
  const size_t batch_size = language_model ? 64 : 256, n = examples.size();
  const size_t batches = (n + batch_size - 1) / batch_size, N = static_cast<size_t>(comm.size());
  const size_t rounds = (batches + N - 1) / N, rank = static_cast<size_t>(comm.rank());
  std::optional<InferenceGuard> guard;
  if (language_model) guard.emplace(model);
  std::vector<double> local;
  for (size_t round = 0; round < rounds; ++round) {
    check_stop(stop);
    const size_t b = round * N + rank, begin = b * batch_size, end = std::min(n, begin + batch_size);
    BatchFigures f;
    if (b < batches)
      f = language_model ? lm_batch(model, task, examples, begin, end) : greedy_batch(model, examples, begin, end);
    local.insert(local.end(), {f.right, f.tokens, f.exact, f.loss, f.loss_tokens, f.early_loss, f.early_tokens,
                               f.late_loss, f.late_tokens, f.late_right});
  }
  const std::vector<double> all = comm.allgather(local);  // (rank, round, BatchFigures::kCount)
  std::vector<BatchFigures> out(batches);
  for (size_t b = 0; b < batches; ++b) {
    const double* f = all.data() + ((b % N) * rounds + b / N) * BatchFigures::kCount;
    out[b] = {f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9]};
  }
  return out;
}

}  // namespace

std::optional<HeldoutScore> score_heldout(SequenceModel& model, const Task& task, const std::vector<Example>& examples,
                                          const StopCheck& stop, const Communicator& comm) {
  HeldoutScore score;
  score.language_model = task.language_model();
  std::vector<BatchFigures> batches;
  try {
    batches = split_batches(model, task, examples, stop, comm);
  } catch (const EvaluationAbandoned&) {
    return std::nullopt;
  }
  score.loss = teacher_forced_loss(batches);
  if (score.language_model) {
    score.lm = lm_totals(batches);
    score.accuracy = Accuracy{score.lm.token, 0, static_cast<int64_t>(examples.size())};
  } else {
    score.accuracy = greedy_totals(batches, static_cast<int64_t>(examples.size()));
  }
  return score;
}

}  // namespace attnlab
