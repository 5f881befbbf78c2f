#include "training/induction_probe.h"

#include <algorithm>

#include "framework/error.h"
#include "framework/probe/attention_stats.h"
#include "framework/probe/induction_scores.h"
#include "training/probe_mode.h"
#include "training/train_state.h"

namespace attnlab {

namespace {

CsvWriter open_induction_csv(const std::string& path, int64_t resume_step) {
  if (resume_step < 0) return CsvWriter(path, TrainingInduction::columns());
  keep_csv_rows_through(path, resume_step);
  return CsvWriter::append(path, TrainingInduction::columns());
}

// Observers of every layer's pattern, removed when it goes (also by an exception).
class LayerPatterns {
 public:
  LayerPatterns(HookTable& hooks, const std::vector<std::pair<std::string, MultiHeadAttention*>>& layers)
      : hooks_(hooks), patterns_(layers.size()) {
    for (size_t i = 0; i < layers.size(); ++i)
      ids_.push_back(hooks_.observe(layers[i].first + ".pattern",
                                    [this, i](const std::string&, const Var& w) { patterns_[i] = w; }));
  }
  ~LayerPatterns() {
    for (int64_t id : ids_) hooks_.remove(id);
  }
  LayerPatterns(const LayerPatterns&) = delete;
  LayerPatterns& operator=(const LayerPatterns&) = delete;
  const Var& pattern(size_t i) const { return patterns_[i]; }

 private:
  HookTable& hooks_;
  std::vector<int64_t> ids_;
  std::vector<Var> patterns_;  // (B, h, T, T) per layer
};

}  // namespace

InductionLayout induction_layout(const Task& task, const TransformerConfig& model) {
  if (model.arch != Arch::decoder)
    throw ValueError("--probe-induction reads a decoder-only model's causal self-attention: use --model decoder, not " +
                     name_of(model.arch));
  const BatchFormat format = batch_format(model, task.language_model());
  InductionLayout l;
  l.first = format == BatchFormat::decoder ? 1 : 0;
  const int64_t symbols = task.vocab_size() - SpecialTokens::count;
  l.n = std::min({kInductionMaxHalf, symbols, (needed_positions(task, model) - l.first) / 2});
  if (l.n < 2)
    throw ValueError("--probe-induction repeats a sequence of at least 2 distinct symbols, but task '" + task.name() +
                     "' has " + std::to_string(symbols) + " symbols and training sequences of length " +
                     std::to_string(needed_positions(task, model)) + (l.first ? " (one is [bos])" : ""));
  return l;
}

ModelInput induction_batch(const InductionLayout& layout, int64_t vocab_size, uint64_t seed) {
  Rng rng(seed);
  const int64_t symbols = vocab_size - SpecialTokens::count;
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t b = 0; b < kInductionSequences; ++b) {
    std::vector<int32_t> all(static_cast<size_t>(symbols));
    for (int64_t s = 0; s < symbols; ++s) all[static_cast<size_t>(s)] = static_cast<int32_t>(SpecialTokens::count + s);
    for (int64_t i = 0; i < layout.n; ++i)  // a partial Fisher-Yates shuffle: n distinct symbols
      std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(rng.integer(i, symbols - 1))]);
    std::vector<int32_t> seq(static_cast<size_t>(layout.first), SpecialTokens::bos);
    for (int copy = 0; copy < 2; ++copy) seq.insert(seq.end(), all.begin(), all.begin() + layout.n);
    seqs.push_back(std::move(seq));
  }
  ModelInput in;
  pad_sequences(seqs, in.tgt_in, in.tgt_pad);
  return in;
}

const std::vector<std::string>& TrainingInduction::columns() {
  static const std::vector<std::string> c = {"step", "layer", "head", "prefix_matching", "previous_token"};
  return c;
}

TrainingInduction::TrainingInduction(TrainState& state, const std::string& dir, int64_t resume_step)
    : state_(state),
      every_(state.settings().probe_induction),
      layout_(induction_layout(state.task(), state.settings().model)),
      batch_(induction_batch(layout_, state.settings().model.vocab_size,
                             derive_seed(state.settings().seed, kInductionStream))),
      attention_(find_attention_modules(state.model())),
      csv_(open_induction_csv(dir + "/probe_induction.csv", resume_step)) {}

void TrainingInduction::record(int64_t step) {
  SequenceModel& model = state_.model();
  std::vector<std::vector<InductionScores>> scores;
  {
    const ProbeMode mode(model);
    const NoGradGuard no_graph;
    const LayerPatterns recorder(model.hooks(), attention_);
    model.forward(batch_);
    for (size_t l = 0; l < attention_.size(); ++l)  // a layer the forward did not run has no rows
      scores.push_back(recorder.pattern(l).defined()
                           ? induction_scores(recorder.pattern(l).value(), layout_.first, layout_.n)
                           : std::vector<InductionScores>{});
  }
  const std::string s = std::to_string(step);
  for (size_t l = 0; l < scores.size(); ++l)
    for (const InductionScores& h : scores[l]) {
      csv_.row({s, attention_[l].first, std::to_string(h.head), CsvWriter::format_number(h.prefix_matching),
                CsvWriter::format_number(h.previous_token)});
      if (!events_) continue;
      const std::string where = attention_[l].first + "/head" + std::to_string(h.head);
      events_->scalar("prefix_matching/" + where, step, h.prefix_matching);
      events_->scalar("previous_token/" + where, step, h.previous_token);
    }
}

}  // namespace attnlab
