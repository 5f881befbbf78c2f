#pragma once
// Encoder-decoder (Vaswani et al.): an encoder stack over src, a decoder stack
// over [bos] tgt with causal self-attention and cross-attention to the
// encoder output. Source and target share tok_emb (one vocabulary).
#include "models/blocks.h"
#include "models/sequence_model.h"

namespace attnlab {

class EncoderDecoder : public SequenceModel {
 public:
  // Parameters: tok_emb, pos_emb (learned), encoder.blocks.{i}.{ln1, attn, ln2, ff},
  // encoder.ln_f (pre-LN), decoder.blocks.{i}.{ln1, self_attn, ln2, cross_attn, ln3, ff},
  // decoder.ln_f (pre-LN), head (models/blocks.h: without norms no ln*,
  // attention-only no ff nor the norm in front of it).
  EncoderDecoder(const TransformerConfig& config, uint64_t seed);

  // Reads src, src_pad, tgt_in, tgt_pad -> logits (B, T_tgt, V). Decodes
  // (greedy, generate) from [bos] given each src; cached steps read the
  // memory's cross-attention keys and values computed once.
  Var forward(const ModelInput& input) override;
  Var forward_from(const ModelInput& input, const std::string& stack, int64_t block, const Var& resid_pre,
                   const Var& memory = Var()) override;
  // The two halves, for decoding with a fixed memory; the position ids as
  // ModelInput's src_pos / tgt_pos (empty: the default rule).
  Var encode(const IntTensor& src, const Tensor& src_pad, const IntTensor& src_pos = IntTensor());  // (B, T_src, d)
  Var decode(const IntTensor& tgt_in, const Tensor& tgt_pad, const Var& memory, const Tensor& src_pad,
             const IntTensor& tgt_pos = IntTensor());

 protected:
  // [bos] for each source (ValueError when a source exceeds max_len).
  std::vector<std::vector<int32_t>> decoding_prompts(const std::vector<std::vector<int32_t>>& sources) const override;
  DecoderStack decoder_stack() const override { return {&decoder_blocks_, decoder_ln_f_.get()}; }
  Var decoding_memory(const std::vector<std::vector<int32_t>>& sources, Tensor& src_pad) override;

 private:
  // The stacks from block `first` on, given its input h (B, T, d): the
  // encoder's output (B, T_src, d); the logits (B, T_tgt, V).
  Var encode_from(size_t first, Var h, const Tensor& src_pad) const;
  Var decode_from(size_t first, Var h, const Tensor& tgt_pad, const Var& memory, const Tensor& src_pad) const;

  std::vector<std::shared_ptr<EncoderBlock>> encoder_blocks_;
  std::vector<std::shared_ptr<DecoderBlock>> decoder_blocks_;
  std::shared_ptr<LayerNorm> encoder_ln_f_, decoder_ln_f_;  // pre-LN only
};

}  // namespace attnlab
