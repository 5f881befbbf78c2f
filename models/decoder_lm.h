#pragma once
// Decoder-only language model: causal self-attention over
// [bos] src [sep] tgt, trained to continue the prompt with tgt [eos].
#include "models/blocks.h"
#include "models/sequence_model.h"

namespace attnlab {

class DecoderLM : public SequenceModel {
 public:
  // Parameters: tok_emb, pos_emb (learned), blocks.{i}.{ln1, attn, ln2, ff}
  // (models/blocks.h: without norms no ln*, attention-only no ln2 and ff),
  // ln_f (pre-LN), head.
  DecoderLM(const TransformerConfig& config, uint64_t seed);

  // Reads tgt_in (B, T) and tgt_pad -> next-token logits (B, T, V). Decodes
  // (greedy, generate) by continuing each [bos] src [sep], KV-cached.
  Var forward(const ModelInput& input) override;
  Var forward_from(const ModelInput& input, const std::string& stack, int64_t block, const Var& resid_pre,
                   const Var& memory = Var()) override;

 protected:
  // [bos] src [sep] of each source (layout bare: src, which must not be
  // empty); ValueError when one exceeds max_len.
  std::vector<std::vector<int32_t>> decoding_prompts(const std::vector<std::vector<int32_t>>& sources) const override;
  DecoderStack decoder_stack() const override { return {&blocks_, ln_f_.get()}; }

 private:
  // Blocks first.. on h (B, T, d), the final norm and the head: logits (B, T, V).
  Var run_blocks(const ModelInput& input, size_t first, Var h) const;

  std::vector<std::shared_ptr<DecoderBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;  // pre-LN only
};

}  // namespace attnlab
