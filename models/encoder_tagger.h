#pragma once
// Encoder tagger: bidirectional self-attention over the input, one prediction
// per position (the benchmark's model).
#include "models/blocks.h"
#include "models/sequence_model.h"

namespace attnlab {

class EncoderTagger : public SequenceModel {
 public:
  // Parameters: tok_emb, pos_emb (learned), blocks.{i}.{ln1, attn, ln2, ff}
  // (models/blocks.h: without norms no ln*, attention-only no ln2 and ff),
  // ln_f (pre-LN), head.
  EncoderTagger(const TransformerConfig& config, uint64_t seed);

  // Reads src (B, T) and src_pad -> logits (B, T, V).
  Var forward(const ModelInput& input) override;
  Var forward_from(const ModelInput& input, const std::string& stack, int64_t block, const Var& resid_pre,
                   const Var& memory = Var()) override;
  // One argmax token per input position (max_new_tokens is not used).
  using SequenceModel::greedy;
  std::vector<std::vector<int32_t>> greedy(const std::vector<std::vector<int32_t>>& sources,
                                           const std::vector<int64_t>& max_new_tokens) override;

 private:
  // Blocks first.. on h (B, T, d), the final norm and the head: logits (B, T, V).
  Var run_blocks(const ModelInput& input, size_t first, Var h) const;

  std::vector<std::shared_ptr<EncoderBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;  // pre-LN only
};

}  // namespace attnlab
