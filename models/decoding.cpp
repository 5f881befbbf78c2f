// Decoding, written once for the decoder-only LM and the encoder-decoder
// (SequenceModel::generate): one prologue, then per token either one cached
// step of every active sequence or a full forward over their prefixes.
#include <algorithm>
#include <utility>

#include "models/batch.h"
#include "models/kv_cache.h"
#include "models/positions.h"

namespace attnlab {

namespace {

using Sequences = std::vector<std::vector<int32_t>>;

std::vector<size_t> lengths_of(const Sequences& seqs) {
  std::vector<size_t> lengths;
  for (const auto& s : seqs) lengths.push_back(s.size());
  return lengths;
}

// The argmax of a logits row, the first on ties (Eigen's maxCoeff).
int32_t argmax(const Real* row, int64_t v) {
  Eigen::Index best = 0;
  ConstVecMap(row, v).maxCoeff(&best);
  return static_cast<int32_t>(best);
}

}  // namespace

// The state every decoding path shares: each sequence as the decoder reads it
// (prompt, then the tokens chosen), the answers, and who is still decoding.
struct SequenceModel::Decoding {
  Sequences seqs, out;
  std::vector<int64_t> budgets, active;
  std::vector<std::vector<int32_t>> tables;  // position plans; empty: 0, 1, ...
  const DecodeOptions* options = nullptr;

  // Sequence i chose its next token from `row` (V): records it; whether it goes on.
  bool advance(size_t i, const Real* row, int64_t v, const TransformerConfig& config) {
    if (options->logits) (*options->logits)[i].emplace_back(row, row + v);
    const int32_t token = options->choose ? options->choose(row, v) : argmax(row, v);
    if (token == SpecialTokens::eos && config.layout != Layout::bare) return false;  // bare answers have no eos
    out[i].push_back(token);
    seqs[i].push_back(token);
    // Within budget, and the next step reads no more positions than the model has.
    return static_cast<int64_t>(out[i].size()) < budgets[i] && static_cast<int64_t>(seqs[i].size()) <= config.max_len;
  }
};

Sequences SequenceModel::generate(const Sequences& sources, const std::vector<int64_t>& budgets,
                                const DecodeOptions& options) {
  check_budgets(sources.size(), budgets);
  Decoding d;
  d.options = &options;
  if (options.raw_prompts) {
    for (size_t i = 0; i < sources.size(); ++i) check_length(sources[i].size(), ("source " + std::to_string(i)).c_str());
    d.seqs = sources;
  } else {
    d.seqs = decoding_prompts(sources);
  }
  d.out.assign(sources.size(), {});
  d.budgets = budgets;
  if (options.logits) options.logits->assign(sources.size(), {});
  for (size_t i = 0; i < sources.size(); ++i)
    if (budgets[i] > 0) d.active.push_back(static_cast<int64_t>(i));
  if (d.active.empty()) return d.out;
  InferenceGuard guard(*this);
  d.tables = decode_positions(lengths_of(d.seqs), budgets);
  if (options.cached && hooks_.empty()) decode_cached(sources, d);
  else decode_uncached(sources, d);
  return d.out;
}

// Every sequence starts at position 0 and advances one position per step, so
// all active ones share the position and the cache length: a sequence still
// reading its prompt is fed its next prompt token, one past it its last
// chosen token. A finished one leaves the batch (its slot stays, unread).
void SequenceModel::decode_cached(const Sequences& sources, Decoding& d) {
  const DecoderStack stack = decoder_stack();
  const auto n = static_cast<int64_t>(sources.size());
  DecoderCache cache = make_decoder_cache(*stack.blocks, n, config_.max_len);
  Tensor src_pad;
  const Var memory = decoding_memory(sources, src_pad);
  if (memory.defined())  // the memory's keys and values, once for every step
    for (const auto& block : *stack.blocks)
      cache.cross.push_back(block->cross_attn->memory_cache(memory, pad_or_null(src_pad)));
  for (int64_t pos = 0; !d.active.empty(); ++pos) {
    IntTensor ids({static_cast<int64_t>(d.active.size()), 1});
    for (size_t a = 0; a < d.active.size(); ++a)
      ids.data[a] = d.seqs[static_cast<size_t>(d.active[a])][static_cast<size_t>(pos)];
    Var h = d.tables.empty() ? embed(ids, pos) : embed_at(ids, step_position_ids(d.tables, d.active, pos));  // (B', 1, d)
    for (size_t l = 0; l < stack.blocks->size(); ++l)
      h = decoder_block_step(*(*stack.blocks)[l], config_.norm, h, cache.self[l],
                             memory.defined() ? &cache.cross[l] : nullptr, d.active);
    h = norm_or_identity(stack.ln_f, h);
    const Var logits = head_logits(h);  // (B', 1, V)
    const int64_t v = logits.size(-1);
    std::vector<int64_t> next;
    for (size_t a = 0; a < d.active.size(); ++a) {
      const auto i = static_cast<size_t>(d.active[a]);
      // Still inside the prompt: its next input is known.
      if (pos + 1 < static_cast<int64_t>(d.seqs[i].size()) ||
          d.advance(i, logits.value().data() + static_cast<int64_t>(a) * v, v, config_))
        next.push_back(d.active[a]);
    }
    d.active = std::move(next);
  }
}

// Every unfinished sequence, right-padded (causal attention keeps a position
// blind to the padding after it), through forward; seq2seq encodes their
// sources again each time.
void SequenceModel::decode_uncached(const Sequences& sources, Decoding& d) {
  const bool seq2seq = config_.arch == Arch::seq2seq;
  while (!d.active.empty()) {
    Sequences prefixes, srcs;
    for (int64_t i : d.active) {
      prefixes.push_back(d.seqs[static_cast<size_t>(i)]);
      if (seq2seq) srcs.push_back(sources[static_cast<size_t>(i)]);
    }
    ModelInput in;
    pad_sequences(prefixes, in.tgt_in, in.tgt_pad);
    const auto lengths = lengths_of(prefixes);
    if (std::all_of(lengths.begin(), lengths.end(), [&](size_t l) { return l == lengths[0]; }))
      in.tgt_pad = Tensor();  // nothing padded
    if (!d.tables.empty()) in.tgt_pos = prefix_position_ids(d.tables, d.active, in.tgt_in.shape[1]);
    if (seq2seq) pad_sequences(srcs, in.src, in.src_pad);
    const Var all = forward(in);  // (B', T, V)
    const int64_t t_len = all.size(1), v = all.size(2);
    std::vector<int64_t> next;
    for (size_t a = 0; a < d.active.size(); ++a) {
      const auto i = static_cast<size_t>(d.active[a]);
      const int64_t row = static_cast<int64_t>(a) * t_len + static_cast<int64_t>(lengths[a]) - 1;  // its last position
      if (d.advance(i, all.value().data() + row * v, v, config_)) next.push_back(d.active[a]);
    }
    d.active = std::move(next);
  }
}

Sequences SequenceModel::greedy_cached(const Sequences& sources, const std::vector<int64_t>& budgets,
                                       DecodeLogits* logits) {
  DecodeOptions o;
  o.logits = logits;
  return generate(sources, budgets, o);
}

Sequences SequenceModel::greedy_uncached(const Sequences& sources, const std::vector<int64_t>& budgets,
                                         DecodeLogits* logits) {
  DecodeOptions o;
  o.cached = false;
  o.logits = logits;
  return generate(sources, budgets, o);
}

Sequences SequenceModel::decoding_prompts(const Sequences&) const {
  throw ValueError("an encoder (arch '" + name_of(config_.arch) + "') tags its input; it does not decode");
}

SequenceModel::DecoderStack SequenceModel::decoder_stack() const {
  throw ValueError("an encoder (arch '" + name_of(config_.arch) + "') tags its input; it does not decode");
}

}  // namespace attnlab
