#include "models/encoder_decoder.h"

#include <algorithm>
#include <utility>

#include "models/batch.h"
#include "models/positions.h"

namespace attnlab {

EncoderDecoder::EncoderDecoder(const TransformerConfig& config, uint64_t seed) : SequenceModel(config, seed) {
  if (config_.arch != Arch::seq2seq)
    throw ValueError("EncoderDecoder needs arch 'seq2seq', got '" + name_of(config_.arch) + "'");
  build_embeddings();
  const bool pre = config_.norm == Norm::pre;

  auto encoder = register_module("encoder", std::make_shared<ModuleList>());
  auto enc_list = encoder->add("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    encoder_blocks_.push_back(
        enc_list->add(std::to_string(i), std::make_shared<EncoderBlock>(config_, init_rng_, dropout_rng_)));
    attention_layers_.push_back(encoder_blocks_.back()->attn.get());
  }
  if (pre) encoder_ln_f_ = encoder->add("ln_f", std::make_shared<LayerNorm>(config_.d_model));

  auto decoder = register_module("decoder", std::make_shared<ModuleList>());
  auto dec_list = decoder->add("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    decoder_blocks_.push_back(
        dec_list->add(std::to_string(i), std::make_shared<DecoderBlock>(config_, true, init_rng_, dropout_rng_)));
    attention_layers_.push_back(decoder_blocks_.back()->self_attn.get());
    attention_layers_.push_back(decoder_blocks_.back()->cross_attn.get());
  }
  if (pre) decoder_ln_f_ = decoder->add("ln_f", std::make_shared<LayerNorm>(config_.d_model));
  build_head();
}

Var EncoderDecoder::encode(const IntTensor& src, const Tensor& src_pad, const IntTensor& src_pos) {
  check_sequence(src, src_pad, "encoder input src");
  const Tensor* pad = pad_or_null(src_pad);
  Var h = observed(embed_at(src, positions_for(src, src_pad, src_pos)));  // (B, T_src, d)
  for (auto& block : encoder_blocks_) h = observed(block->forward(h, pad));
  return encoder_ln_f_ ? encoder_ln_f_->forward(h) : h;
}

Var EncoderDecoder::decode(const IntTensor& tgt_in, const Tensor& tgt_pad, const Var& memory, const Tensor& src_pad,
                           const IntTensor& tgt_pos) {
  check_sequence(tgt_in, tgt_pad, "decoder input tgt_in");
  if (memory.dim() != 3 || memory.size(0) != tgt_in.shape[0])
    throw ShapeError("EncoderDecoder: memory " + memory.value().shape_str() + " does not fit tgt_in " +
                     shape_str(tgt_in.shape) + " (batch sizes differ)");
  const Tensor* self_pad = pad_or_null(tgt_pad);
  const Tensor* mem_pad = pad_or_null(src_pad);
  Var h = observed(embed_at(tgt_in, positions_for(tgt_in, tgt_pad, tgt_pos)));  // (B, T_tgt, d)
  for (auto& block : decoder_blocks_) h = observed(block->forward(h, self_pad, memory, mem_pad));
  if (decoder_ln_f_) h = decoder_ln_f_->forward(h);
  return head_logits(h);  // (B, T_tgt, V)
}

Var EncoderDecoder::forward(const ModelInput& input) {
  Var memory = encode(input.src, input.src_pad, input.src_pos);
  return decode(input.tgt_in, input.tgt_pad, memory, input.src_pad, input.tgt_pos);
}

std::vector<std::vector<int32_t>> EncoderDecoder::greedy(const std::vector<std::vector<int32_t>>& sources,
                                                         const std::vector<int64_t>& max_new_tokens) {
  return greedy_cached(sources, max_new_tokens);
}

namespace {

// The most steps any sequence may take: its budget, at most the table.
int64_t longest_budget(const std::vector<int64_t>& budgets, int64_t max_len) {
  int64_t steps = 0;
  for (int64_t b : budgets) steps = std::max(steps, std::min(b, max_len));
  return steps;
}

}  // namespace

std::vector<std::vector<int32_t>> EncoderDecoder::greedy_cached(const std::vector<std::vector<int32_t>>& sources,
                                                                const std::vector<int64_t>& max_new_tokens,
                                                                DecodeLogits* logits) {
  check_budgets(sources.size(), max_new_tokens);
  const size_t n = sources.size();
  std::vector<std::vector<int32_t>> out(n);
  if (logits) logits->assign(n, {});
  const int64_t steps = longest_budget(max_new_tokens, config_.max_len);
  if (n == 0 || steps <= 0) return out;
  for (size_t i = 0; i < n; ++i) check_length(sources[i].size(), ("source " + std::to_string(i)).c_str());
  InferenceGuard guard(*this);
  ModelInput in;
  pad_sequences(sources, in.src, in.src_pad);
  Var memory = encode(in.src, in.src_pad);
  DecoderCache cache = make_decoder_cache(decoder_blocks_, static_cast<int64_t>(n), steps);
  const auto tables = decode_positions(std::vector<size_t>(n, 1), max_new_tokens);  // [bos]; empty: 0, 1, ...
  for (auto& block : decoder_blocks_)
    cache.cross.push_back(block->cross_attn->memory_cache(memory, pad_or_null(in.src_pad)));  // once for every step

  // Every sequence decodes from [bos] at position 0, one position per step;
  // a finished one leaves the batch (its slot stays, unread).
  std::vector<int64_t> active;
  std::vector<int32_t> last(n, SpecialTokens::bos);
  for (size_t i = 0; i < n; ++i)
    if (max_new_tokens[i] > 0) active.push_back(static_cast<int64_t>(i));
  for (int64_t pos = 0; pos < steps && !active.empty(); ++pos) {
    IntTensor ids({static_cast<int64_t>(active.size()), 1});
    for (size_t a = 0; a < active.size(); ++a) ids.data[a] = last[static_cast<size_t>(active[a])];
    Var h = tables.empty() ? embed(ids, pos) : embed_at(ids, step_position_ids(tables, active, pos));  // (B', 1, d)
    for (size_t l = 0; l < decoder_blocks_.size(); ++l)
      h = decoder_block_step(*decoder_blocks_[l], config_.norm == Norm::pre, h, cache.self[l], &cache.cross[l], active);
    if (decoder_ln_f_) h = decoder_ln_f_->forward(h);
    Var step_logits = head_logits(h);  // (B', 1, V)
    const std::vector<int32_t> best = argmax_rows(step_logits);
    std::vector<int64_t> next;
    for (size_t a = 0; a < active.size(); ++a) {
      const auto i = static_cast<size_t>(active[a]);
      record_logits(logits, i, step_logits, static_cast<int64_t>(a));
      if (best[a] == SpecialTokens::eos) continue;
      out[i].push_back(best[a]);
      last[i] = best[a];
      if (static_cast<int64_t>(out[i].size()) < max_new_tokens[i]) next.push_back(active[a]);
    }
    active = std::move(next);
  }
  return out;
}

std::vector<std::vector<int32_t>> EncoderDecoder::greedy_uncached(const std::vector<std::vector<int32_t>>& sources,
                                                                  const std::vector<int64_t>& max_new_tokens,
                                                                  DecodeLogits* logits) {
  check_budgets(sources.size(), max_new_tokens);
  const size_t n = sources.size();
  std::vector<std::vector<int32_t>> out(n);
  if (logits) logits->assign(n, {});
  const int64_t steps = longest_budget(max_new_tokens, config_.max_len);
  if (n == 0 || steps <= 0) return out;
  for (size_t i = 0; i < n; ++i) check_length(sources[i].size(), ("source " + std::to_string(i)).c_str());
  InferenceGuard guard(*this);
  ModelInput in;
  pad_sequences(sources, in.src, in.src_pad);
  Var memory = encode(in.src, in.src_pad);  // once for every step

  // All rows share the decoder length (they all start at [bos] and grow by one
  // token per step), so no target padding is needed; finished rows just ride along.
  const int64_t b = static_cast<int64_t>(n);
  const auto tables = decode_positions(std::vector<size_t>(n, 1), max_new_tokens);  // as greedy_cached's
  std::vector<int64_t> every_row(n);
  for (size_t i = 0; i < n; ++i) every_row[i] = static_cast<int64_t>(i);
  std::vector<int32_t> tokens(n, SpecialTokens::bos);  // (B, t) row-major, grown column by column
  std::vector<bool> done(n, false);
  size_t remaining = n;
  for (size_t i = 0; i < n; ++i)
    if (max_new_tokens[i] <= 0) {
      done[i] = true;
      --remaining;
    }
  for (int64_t t = 1; t <= steps && remaining > 0; ++t) {
    IntTensor tgt_in({b, t});
    tgt_in.data = tokens;
    const IntTensor tgt_pos = tables.empty() ? IntTensor() : prefix_position_ids(tables, every_row, t);
    Var all = decode(tgt_in, Tensor(), memory, in.src_pad, tgt_pos);  // (B, t, V)
    ConstMatMap rows = std::as_const(all).value().matrix();
    std::vector<int32_t> next(static_cast<size_t>(b * (t + 1)));
    for (int64_t i = 0; i < b; ++i) {
      std::copy(tokens.begin() + i * t, tokens.begin() + (i + 1) * t, next.begin() + i * (t + 1));
      Eigen::Index best = 0;
      rows.row(i * t + t - 1).maxCoeff(&best);
      const int32_t token = static_cast<int32_t>(best);
      next[static_cast<size_t>(i * (t + 1) + t)] = token;
      const size_t row = static_cast<size_t>(i);
      if (done[row]) continue;
      if (logits) {
        const Real* r = rows.row(i * t + t - 1).data();
        (*logits)[row].emplace_back(r, r + rows.cols());
      }
      if (token != SpecialTokens::eos) out[row].push_back(token);
      if (token == SpecialTokens::eos || static_cast<int64_t>(out[row].size()) >= max_new_tokens[row]) {
        done[row] = true;
        --remaining;
      }
    }
    tokens = std::move(next);
  }
  return out;
}

}  // namespace attnlab
