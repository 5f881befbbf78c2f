#pragma once
// The transformer blocks shared by the three model shapes, in the pre-LN
// (x + f(LN(x)), the modern default) and post-LN (LN(x + f(x)), Vaswani et al.)
// arrangements. Dropout hits each sublayer output before the residual add.
#include <memory>
#include <string>

#include "framework/nn/nn.h"
#include "models/config.h"

namespace attnlab {

// A module that only holds named children: `blocks` (children "0", "1", ...)
// and the `encoder` / `decoder` stacks of the seq2seq model.
class ModuleList : public Module {
 public:
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> child) {
    return register_module(name, std::move(child));
  }
};

// The attention options a config implies. Rotary positions apply to
// self-attention only (`rope`): query and key positions of cross-attention
// belong to different sequences.
MultiHeadAttentionOptions attention_options(const TransformerConfig& config, bool rope);

// Self-attention + feed-forward. Children: ln1, attn, ln2, ff (+ dropout).
class EncoderBlock : public Module {
 public:
  EncoderBlock(const TransformerConfig& config, Rng& init, Rng& dropout_rng);
  // x (B, T, d); key_padding (B, T) or null -> (B, T, d).
  Var forward(const Var& x, const Tensor* key_padding);
  // Declares the block's hook points under `prefix` ("blocks.1."), in forward
  // order: resid_pre, attn.*, resid_mid, mlp.*, resid_post (docs/hooks.md).
  void attach_hooks(HookTable& table, const std::string& prefix);

  std::shared_ptr<LayerNorm> ln1;
  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<LayerNorm> ln2;
  std::shared_ptr<FeedForward> ff;

 private:
  std::shared_ptr<Dropout> dropout_;
  bool pre_norm_;
  HookSite hooks_;
};

// Causal self-attention, optional cross-attention, feed-forward.
// Without cross-attention (decoder-only LM) the children are ln1, attn, ln2,
// ff; with it (seq2seq) ln1, self_attn, ln2, cross_attn, ln3, ff.
class DecoderBlock : public Module {
 public:
  DecoderBlock(const TransformerConfig& config, bool cross_attention, Rng& init, Rng& dropout_rng);
  // x (B, T, d); self_padding (B, T) or null; memory (B, T_src, d) and its
  // memory_padding (B, T_src) when the block has cross-attention.
  Var forward(const Var& x, const Tensor* self_padding, const Var& memory = Var(),
              const Tensor* memory_padding = nullptr);
  // Declares the block's hook points under `prefix`, in forward order:
  // resid_pre, attn.* (self_attn.* with cross-attention), resid_mid, then with
  // cross-attention cross_attn.* and resid_mid_cross, mlp.*, resid_post.
  void attach_hooks(HookTable& table, const std::string& prefix);

  std::shared_ptr<LayerNorm> ln1;
  std::shared_ptr<MultiHeadAttention> self_attn;  // registered as "attn" without cross-attention
  std::shared_ptr<LayerNorm> ln2;
  std::shared_ptr<MultiHeadAttention> cross_attn;  // null without cross-attention
  std::shared_ptr<LayerNorm> ln3;                  // null without cross-attention
  std::shared_ptr<FeedForward> ff;

 private:
  std::shared_ptr<Dropout> dropout_;
  bool pre_norm_;
  HookSite hooks_;
};

// The output projection to vocabulary logits: x Wᵀ + b with W = head.weight
// (V, d), or with tie_embeddings the token embedding table (V, d) passed to
// forward; the bias `head.bias` is always the head's own. Init as Linear.
class TokenHead : public Module {
 public:
  TokenHead(int64_t d, int64_t vocab_size, bool tied, Rng& init);
  // x (..., d) -> (..., V); `embedding` is used (and required) when tied.
  Var forward(const Var& x, const Var& embedding) const;

  Var weight;  // (V, d); undefined when tied
  Var bias;    // (V)
};

}  // namespace attnlab
