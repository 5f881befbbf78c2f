#pragma once
// The transformer blocks shared by the three model shapes, in the pre-LN
// (x + f(LN(x)), the modern default), post-LN (LN(x + f(x)), Vaswani et al.)
// and norm-free (x + f(x), Nanda et al.) arrangements, with or without the
// feed-forward sublayer (attention_only). Dropout hits each sublayer output
// before the residual add.
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

// One residual sublayer f around the stream x as `norm` arranges it: pre
// x + f(ln(x)), post ln(x + f(x)), none x + f(x). `ln` is the sublayer's norm,
// null exactly when norm is none.
template <class F>
Var residual_sublayer(Norm norm, const LayerNorm* ln, const Var& x, const F& f) {
  if (norm == Norm::post) return ln->forward(x + f(x));
  return x + f(ln ? ln->forward(x) : x);
}

// x through an optional norm: ln(x), or x itself when ln is null (norm none).
inline Var norm_or_identity(const LayerNorm* ln, const Var& x) { return ln ? ln->forward(x) : x; }

// The attention options a config implies. Rotary positions apply to
// self-attention only (`rope`): query and key positions of cross-attention
// belong to different sequences.
MultiHeadAttentionOptions attention_options(const TransformerConfig& config, bool rope);

// Self-attention + feed-forward. Children: ln1, attn, ln2, ff (+ dropout);
// without norms (norm none) no ln1 and ln2, attention-only no ln2 and ff.
class EncoderBlock : public Module {
 public:
  EncoderBlock(const TransformerConfig& config, Rng& init, Rng& dropout_rng);
  // x (B, T, d); key_padding (B, T) or null -> (B, T, d).
  Var forward(const Var& x, const Tensor* key_padding);
  // Declares the block's hook points under `prefix` ("blocks.1."), in forward
  // order: resid_pre, attn.*, resid_mid, mlp.*, resid_post (docs/hooks.md);
  // attention-only: resid_pre, attn.*, resid_post.
  void attach_hooks(HookTable& table, const std::string& prefix);

  std::shared_ptr<LayerNorm> ln1;             // null with norm none
  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<LayerNorm> ln2;             // null with norm none or attention-only
  std::shared_ptr<FeedForward> ff;            // null attention-only

 private:
  std::shared_ptr<Dropout> dropout_;
  Norm norm_;
  HookSite hooks_;
};

// Causal self-attention, optional cross-attention, feed-forward.
// Without cross-attention (decoder-only LM) the children are ln1, attn, ln2,
// ff; with it (seq2seq) ln1, self_attn, ln2, cross_attn, ln3, ff. Norm none
// drops the ln*, attention-only the feed-forward and the norm in front of it
// (ln2, or ln3 with cross-attention).
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
  // Attention-only, resid_post follows the last attention: resid_pre, attn.*,
  // resid_post; with cross-attention resid_pre, self_attn.*, resid_mid,
  // cross_attn.*, resid_post.
  void attach_hooks(HookTable& table, const std::string& prefix);

  // The norms in front of (pre) or after (post) the sublayers: self-attention,
  // cross-attention, feed-forward; each null where the block has none.
  const LayerNorm* self_norm() const { return ln1.get(); }
  const LayerNorm* cross_norm() const { return cross_attn ? ln2.get() : nullptr; }
  const LayerNorm* ff_norm() const { return cross_attn ? ln3.get() : ln2.get(); }

  std::shared_ptr<LayerNorm> ln1;                  // null with norm none
  std::shared_ptr<MultiHeadAttention> self_attn;  // registered as "attn" without cross-attention
  std::shared_ptr<LayerNorm> ln2;                  // see self_norm() ... ff_norm()
  std::shared_ptr<MultiHeadAttention> cross_attn;  // null without cross-attention
  std::shared_ptr<LayerNorm> ln3;                  // null without cross-attention
  std::shared_ptr<FeedForward> ff;                 // null attention-only

 private:
  std::shared_ptr<Dropout> dropout_;
  Norm norm_;
  HookSite hooks_;
};

// The output projection to vocabulary logits: x Wᵀ + b with W = head.weight
// (V, d), or with tie_embeddings the token embedding table (V, d) passed to
// forward; the bias `head.bias` is always the head's own, and absent with
// `bias` false (no_bias). Init as Linear.
class TokenHead : public Module {
 public:
  TokenHead(int64_t d, int64_t vocab_size, bool tied, Rng& init, bool bias = true);
  // x (..., d) -> (..., V); `embedding` is used (and required) when tied.
  Var forward(const Var& x, const Var& embedding) const;

  Var weight;  // (V, d); undefined when tied
  Var bias;    // (V); undefined without bias
};

}  // namespace attnlab
