#include "models/decoder_lm.h"

#include <algorithm>
#include <utility>

#include "models/batch.h"
#include "models/positions.h"

namespace attnlab {

DecoderLM::DecoderLM(const TransformerConfig& config, uint64_t seed) : SequenceModel(config, seed) {
  if (config_.arch != Arch::decoder) throw ValueError("DecoderLM needs arch 'decoder', got '" + name_of(config_.arch) + "'");
  build_embeddings();
  auto list = register_module("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    blocks_.push_back(list->add(std::to_string(i), std::make_shared<DecoderBlock>(config_, false, init_rng_,
                                                                                  dropout_rng_)));
    attention_layers_.push_back(blocks_.back()->self_attn.get());
  }
  if (config_.norm == Norm::pre) ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(config_.d_model));
  build_head();
}

Var DecoderLM::forward(const ModelInput& input) {
  check_sequence(input.tgt_in, input.tgt_pad, "decoder input tgt_in");
  const Tensor* pad = pad_or_null(input.tgt_pad);
  Var h = observed(embed_at(input.tgt_in, positions_for(input.tgt_in, input.tgt_pad, input.tgt_pos)));  // (B, T, d)
  for (auto& block : blocks_) h = observed(block->forward(h, pad));
  if (ln_f_) h = ln_f_->forward(h);
  return head_logits(h);  // (B, T, V)
}

namespace {

std::vector<size_t> prompt_lengths(const std::vector<std::vector<int32_t>>& seqs) {
  std::vector<size_t> lengths;
  for (const auto& s : seqs) lengths.push_back(s.size());
  return lengths;
}

}  // namespace

std::vector<std::vector<int32_t>> DecoderLM::prompts(const std::vector<std::vector<int32_t>>& sources) const {
  const bool bare = config_.layout == Layout::bare;
  std::vector<std::vector<int32_t>> seqs(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    if (bare && sources[i].empty())
      throw ValueError("source " + std::to_string(i) +
                       " is empty: a decoder with layout 'bare' predicts the answer from the input's last token");
    if (!bare) seqs[i].push_back(SpecialTokens::bos);
    seqs[i].insert(seqs[i].end(), sources[i].begin(), sources[i].end());
    if (!bare) seqs[i].push_back(SpecialTokens::sep);
    check_length(seqs[i].size(), ((bare ? "prompt src of source " : "prompt [bos] src [sep] of source ") +
                                  std::to_string(i)).c_str());
  }
  return seqs;
}

bool DecoderLM::accept(int32_t token, std::vector<int32_t>& out, std::vector<int32_t>& seq,
                       int64_t max_new_tokens) const {
  if (token == SpecialTokens::eos && config_.layout != Layout::bare) return false;  // bare answers have no eos
  out.push_back(token);
  seq.push_back(token);
  // The next step would read more positions than the model has.
  return static_cast<int64_t>(out.size()) < max_new_tokens && static_cast<int64_t>(seq.size()) <= config_.max_len;
}

std::vector<std::vector<int32_t>> DecoderLM::greedy(const std::vector<std::vector<int32_t>>& sources,
                                                    const std::vector<int64_t>& max_new_tokens) {
  return greedy_cached(sources, max_new_tokens);
}

std::vector<std::vector<int32_t>> DecoderLM::greedy_cached(const std::vector<std::vector<int32_t>>& sources,
                                                           const std::vector<int64_t>& max_new_tokens,
                                                           DecodeLogits* logits) {
  check_budgets(sources.size(), max_new_tokens);
  const size_t n = sources.size();
  std::vector<std::vector<int32_t>> out(n), seqs = prompts(sources);
  if (logits) logits->assign(n, {});
  std::vector<int64_t> active;  // the sequences with a budget
  for (size_t i = 0; i < n; ++i)
    if (max_new_tokens[i] > 0) active.push_back(static_cast<int64_t>(i));
  if (active.empty()) return out;
  InferenceGuard guard(*this);
  // Every sequence starts at position 0 and advances one position per step,
  // so all active ones share the position and the cache length: a sequence
  // still reading its prompt is fed its next prompt token, and one that
  // reached its end its last generated token.
  DecoderCache cache = make_decoder_cache(blocks_, static_cast<int64_t>(n), config_.max_len);
  const auto tables = decode_positions(prompt_lengths(seqs), max_new_tokens);  // empty: positions 0, 1, ...
  for (int64_t pos = 0; !active.empty(); ++pos) {
    IntTensor ids({static_cast<int64_t>(active.size()), 1});
    for (size_t a = 0; a < active.size(); ++a)
      ids.data[a] = seqs[static_cast<size_t>(active[a])][static_cast<size_t>(pos)];
    Var h = tables.empty() ? embed(ids, pos) : embed_at(ids, step_position_ids(tables, active, pos));  // (B', 1, d)
    for (size_t l = 0; l < blocks_.size(); ++l)
      h = decoder_block_step(*blocks_[l], config_.norm == Norm::pre, h, cache.self[l], nullptr, active);
    if (ln_f_) h = ln_f_->forward(h);
    Var step_logits = head_logits(h);  // (B', 1, V)
    const std::vector<int32_t> best = argmax_rows(step_logits);
    std::vector<int64_t> next;
    for (size_t a = 0; a < active.size(); ++a) {
      const auto i = static_cast<size_t>(active[a]);
      // Still inside the prompt (or, after a token was chosen, its next input is known).
      if (pos + 1 < static_cast<int64_t>(seqs[i].size())) {
        next.push_back(active[a]);
        continue;
      }
      record_logits(logits, i, step_logits, static_cast<int64_t>(a));
      if (accept(best[a], out[i], seqs[i], max_new_tokens[i])) next.push_back(active[a]);
    }
    active = std::move(next);
  }
  return out;
}

std::vector<std::vector<int32_t>> DecoderLM::greedy_uncached(const std::vector<std::vector<int32_t>>& sources,
                                                             const std::vector<int64_t>& max_new_tokens,
                                                             DecodeLogits* logits) {
  check_budgets(sources.size(), max_new_tokens);
  const size_t n = sources.size();
  std::vector<std::vector<int32_t>> out(n), seqs = prompts(sources);  // seqs: [bos] src [sep] generated...
  if (logits) logits->assign(n, {});
  InferenceGuard guard(*this);
  const auto tables = decode_positions(prompt_lengths(seqs), max_new_tokens);  // as greedy_cached's
  std::vector<bool> done(n);
  int64_t steps = 0;
  for (size_t i = 0; i < n; ++i) {
    done[i] = max_new_tokens[i] <= 0;
    steps = std::max(steps, max_new_tokens[i]);
  }
  for (int64_t step = 0; step < steps; ++step) {
    // Every unfinished sequence, right-padded: causal attention keeps a
    // position blind to the padding after it, so the batch changes nothing.
    std::vector<size_t> active;
    std::vector<int64_t> rows;
    std::vector<std::vector<int32_t>> batch;
    for (size_t i = 0; i < n; ++i)
      if (!done[i]) {
        active.push_back(i);
        rows.push_back(static_cast<int64_t>(i));
        batch.push_back(seqs[i]);
      }
    if (active.empty()) break;
    ModelInput in;
    pad_sequences(batch, in.tgt_in, in.tgt_pad);
    if (!tables.empty()) in.tgt_pos = prefix_position_ids(tables, rows, in.tgt_in.shape[1]);
    Var all = forward(in);  // (B', T, V)
    const int64_t t_len = all.size(1), v = all.size(2);
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      // The logits at the sequence's last position, as a (1, 1, V) row.
      const int64_t row = static_cast<int64_t>(a) * t_len + static_cast<int64_t>(seqs[i].size()) - 1;
      Tensor last = Tensor::uninitialized({1, 1, v});
      std::copy(all.value().data() + row * v, all.value().data() + (row + 1) * v, last.data());
      Var last_row(std::move(last));
      record_logits(logits, i, last_row, 0);
      done[i] = !accept(argmax_rows(last_row)[0], out[i], seqs[i], max_new_tokens[i]);
    }
  }
  return out;
}

}  // namespace attnlab
