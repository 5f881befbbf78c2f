#pragma once
// Decoder-only language model: causal self-attention over
// [bos] src [sep] tgt, trained to continue the prompt with tgt [eos].
#include "models/blocks.h"
#include "models/kv_cache.h"
#include "models/sequence_model.h"

namespace attnlab {

class DecoderLM : public SequenceModel {
 public:
  // Parameters: tok_emb, pos_emb (learned), blocks.{i}.{ln1, attn, ln2, ff},
  // ln_f (pre-LN), head.
  DecoderLM(const TransformerConfig& config, uint64_t seed);

  // Reads tgt_in (B, T) and tgt_pad -> next-token logits (B, T, V).
  Var forward(const ModelInput& input) override;
  // Continues each [bos] src [sep]; returns the generated tokens without eos.
  // KV-cached (greedy_cached).
  using SequenceModel::greedy;
  std::vector<std::vector<int32_t>> greedy(const std::vector<std::vector<int32_t>>& sources,
                                           const std::vector<int64_t>& max_new_tokens) override;
  // One position per step for every sequence, prompt included, attending over
  // cached keys and values. With logits, receives each chosen token's logits.
  std::vector<std::vector<int32_t>> greedy_cached(const std::vector<std::vector<int32_t>>& sources,
                                                  const std::vector<int64_t>& max_new_tokens,
                                                  DecodeLogits* logits = nullptr);
  // The reference the cached path is tested against: a full forward over the
  // whole prefix for every new token.
  std::vector<std::vector<int32_t>> greedy_uncached(const std::vector<std::vector<int32_t>>& sources,
                                                    const std::vector<int64_t>& max_new_tokens,
                                                    DecodeLogits* logits = nullptr);
  // The same budget for every source.
  std::vector<std::vector<int32_t>> greedy_cached(const std::vector<std::vector<int32_t>>& sources,
                                                  int64_t max_new_tokens, DecodeLogits* logits = nullptr) {
    return greedy_cached(sources, std::vector<int64_t>(sources.size(), max_new_tokens), logits);
  }
  std::vector<std::vector<int32_t>> greedy_uncached(const std::vector<std::vector<int32_t>>& sources,
                                                    int64_t max_new_tokens, DecodeLogits* logits = nullptr) {
    return greedy_uncached(sources, std::vector<int64_t>(sources.size(), max_new_tokens), logits);
  }

 private:
  // [bos] src [sep] of each source (layout bare: src, which must not be
  // empty); ValueError when one exceeds max_len.
  std::vector<std::vector<int32_t>> prompts(const std::vector<std::vector<int32_t>>& sources) const;
  // Whether a sequence that just got `token` goes on: not eos (any token with
  // layout bare), under
  // max_new_tokens, and its next position within max_len.
  bool accept(int32_t token, std::vector<int32_t>& out, std::vector<int32_t>& seq, int64_t max_new_tokens) const;

  std::vector<std::shared_ptr<DecoderBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;  // pre-LN only
};

}  // namespace attnlab
