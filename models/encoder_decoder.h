#pragma once
// Encoder-decoder (Vaswani et al.): an encoder stack over src, a decoder stack
// over [bos] tgt with causal self-attention and cross-attention to the
// encoder output. Source and target share tok_emb (one vocabulary).
#include "models/blocks.h"
#include "models/kv_cache.h"
#include "models/sequence_model.h"

namespace attnlab {

class EncoderDecoder : public SequenceModel {
 public:
  // Parameters: tok_emb, pos_emb (learned), encoder.blocks.{i}.{ln1, attn, ln2, ff},
  // encoder.ln_f (pre-LN), decoder.blocks.{i}.{ln1, self_attn, ln2, cross_attn, ln3, ff},
  // decoder.ln_f (pre-LN), head.
  EncoderDecoder(const TransformerConfig& config, uint64_t seed);

  // Reads src, src_pad, tgt_in, tgt_pad -> logits (B, T_tgt, V).
  Var forward(const ModelInput& input) override;
  // Encodes each src and decodes from [bos]; returns the tokens without eos.
  // KV-cached (greedy_cached).
  using SequenceModel::greedy;
  std::vector<std::vector<int32_t>> greedy(const std::vector<std::vector<int32_t>>& sources,
                                           const std::vector<int64_t>& max_new_tokens) override;
  // One target position per step, attending over cached self-attention keys
  // and values and over the memory's keys and values computed once. With
  // logits, receives each chosen token's logits.
  std::vector<std::vector<int32_t>> greedy_cached(const std::vector<std::vector<int32_t>>& sources,
                                                  const std::vector<int64_t>& max_new_tokens,
                                                  DecodeLogits* logits = nullptr);
  // The reference the cached path is tested against: the decoder reruns over
  // the whole target prefix for every new token.
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

  // The two halves, for decoding with a fixed memory; the position ids as
  // ModelInput's src_pos / tgt_pos (empty: the default rule).
  Var encode(const IntTensor& src, const Tensor& src_pad, const IntTensor& src_pos = IntTensor());  // (B, T_src, d)
  Var decode(const IntTensor& tgt_in, const Tensor& tgt_pad, const Var& memory, const Tensor& src_pad,
             const IntTensor& tgt_pos = IntTensor());

 private:
  std::vector<std::shared_ptr<EncoderBlock>> encoder_blocks_;
  std::vector<std::shared_ptr<DecoderBlock>> decoder_blocks_;
  std::shared_ptr<LayerNorm> encoder_ln_f_, decoder_ln_f_;  // pre-LN only
};

}  // namespace attnlab
