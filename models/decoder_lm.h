#pragma once
// Decoder-only language model: causal self-attention over
// [bos] src [sep] tgt, trained to continue the prompt with tgt [eos].
#include "models/blocks.h"
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
  std::vector<std::vector<int32_t>> greedy(const std::vector<std::vector<int32_t>>& sources,
                                           int64_t max_new_tokens) override;

 private:
  std::vector<std::shared_ptr<DecoderBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;  // pre-LN only
};

}  // namespace attnlab
