#include "models/blocks.h"

#include <cmath>

#include "framework/ops/elementwise.h"
#include "framework/ops/matmul.h"

namespace attnlab {

MultiHeadAttentionOptions attention_options(const TransformerConfig& c, bool rope) {
  MultiHeadAttentionOptions o;
  o.d_model = c.d_model;
  o.n_heads = c.n_heads;
  o.d_k = c.d_k;
  o.d_v = c.d_v;
  o.scale = parse_attention_scale(c.attn_scale);
  o.projections = !c.parameter_free_attention;
  o.bias = !c.no_bias;
  o.dropout = static_cast<Real>(c.attn_dropout);
  o.rope = rope;
  return o;
}

// Named, not anonymous: the unity build joins this file with others of the library.
namespace blocks_impl {

// The block's feed-forward sublayer as the config gives it.
std::shared_ptr<FeedForward> feed_forward(const TransformerConfig& c, Rng& init, Rng& dropout_rng) {
  return std::make_shared<FeedForward>(c.d_model, c.d_ff, c.activation, static_cast<Real>(c.dropout), init,
                                       dropout_rng, !c.no_bias);
}

}  // namespace blocks_impl

// ---- EncoderBlock ------------------------------------------------------------

EncoderBlock::EncoderBlock(const TransformerConfig& c, Rng& init, Rng& dropout_rng) : norm_(c.norm) {
  auto optional_norm = [&](const char* name) {  // none (null) with norm none
    return c.norm == Norm::none ? nullptr : register_module(name, std::make_shared<LayerNorm>(c.d_model));
  };
  ln1 = optional_norm("ln1");
  attn = register_module("attn", std::make_shared<MultiHeadAttention>(
                                     attention_options(c, c.positional == Positional::rope), init, dropout_rng));
  if (!c.attention_only) {
    ln2 = optional_norm("ln2");
    ff = register_module("ff", blocks_impl::feed_forward(c, init, dropout_rng));
  }
  dropout_ = register_module("dropout", std::make_shared<Dropout>(static_cast<Real>(c.dropout), dropout_rng));
}

Var EncoderBlock::forward(const Var& input, const Tensor* key_padding) {
  auto attend = [&](const Var& in) { return dropout_->forward(attn->forward(in, Var(), false, key_padding)); };
  auto feed = [&](const Var& in) { return dropout_->forward(ff->forward(in)); };
  const Var x = hooks_.pass("resid_pre", input);
  const Var h = residual_sublayer(norm_, ln1.get(), x, attend);
  if (!ff) return hooks_.pass("resid_post", h);
  return hooks_.pass("resid_post", residual_sublayer(norm_, ln2.get(), hooks_.pass("resid_mid", h), feed));
}

void EncoderBlock::attach_hooks(HookTable& table, const std::string& prefix) {
  hooks_.attach(table, prefix);
  hooks_.declare("resid_pre", "B, T, d");
  attn->attach_hooks(table, prefix + "attn.");
  if (ff) {
    hooks_.declare("resid_mid", "B, T, d");
    ff->attach_hooks(table, prefix + "mlp.");
  }
  hooks_.declare("resid_post", "B, T, d");
}

// ---- DecoderBlock ------------------------------------------------------------

DecoderBlock::DecoderBlock(const TransformerConfig& c, bool cross_attention, Rng& init, Rng& dropout_rng)
    : norm_(c.norm) {
  auto optional_norm = [&](const char* name) {  // none (null) with norm none
    return c.norm == Norm::none ? nullptr : register_module(name, std::make_shared<LayerNorm>(c.d_model));
  };
  ln1 = optional_norm("ln1");
  self_attn = register_module(cross_attention ? "self_attn" : "attn",
                              std::make_shared<MultiHeadAttention>(attention_options(c, c.positional == Positional::rope),
                                                                   init, dropout_rng));
  // ln2 is the norm of the sublayer after self-attention: cross-attention, else the feed-forward.
  if (cross_attention || !c.attention_only) ln2 = optional_norm("ln2");
  if (cross_attention) {
    cross_attn = register_module(
        "cross_attn", std::make_shared<MultiHeadAttention>(attention_options(c, false), init, dropout_rng));
    if (!c.attention_only) ln3 = optional_norm("ln3");
  }
  if (!c.attention_only) ff = register_module("ff", blocks_impl::feed_forward(c, init, dropout_rng));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(static_cast<Real>(c.dropout), dropout_rng));
}

Var DecoderBlock::forward(const Var& input, const Tensor* self_padding, const Var& memory,
                          const Tensor* memory_padding) {
  if (cross_attn && !memory.defined())
    throw ValueError("DecoderBlock: a block with cross-attention needs the encoder memory");
  auto self = [&](const Var& in) { return dropout_->forward(self_attn->forward(in, Var(), true, self_padding)); };
  auto cross = [&](const Var& in) {
    return dropout_->forward(cross_attn->forward(in, memory, false, memory_padding));
  };
  auto feed = [&](const Var& in) { return dropout_->forward(ff->forward(in)); };
  // Each sublayer's output passes its hook point; resid_post follows the last one (attention-only: an attention).
  const char* after_self = cross_attn || ff ? "resid_mid" : "resid_post";
  const char* after_cross = ff ? "resid_mid_cross" : "resid_post";
  const Var x = hooks_.pass("resid_pre", input);
  Var h = hooks_.pass(after_self, residual_sublayer(norm_, self_norm(), x, self));
  if (cross_attn) h = hooks_.pass(after_cross, residual_sublayer(norm_, cross_norm(), h, cross));
  if (!ff) return h;
  return hooks_.pass("resid_post", residual_sublayer(norm_, ff_norm(), h, feed));
}

void DecoderBlock::attach_hooks(HookTable& table, const std::string& prefix) {
  hooks_.attach(table, prefix);
  hooks_.declare("resid_pre", "B, T, d");
  self_attn->attach_hooks(table, prefix + (cross_attn ? "self_attn." : "attn."));
  if (cross_attn || ff) hooks_.declare("resid_mid", "B, T, d");
  if (cross_attn) {
    cross_attn->attach_hooks(table, prefix + "cross_attn.");
    if (ff) hooks_.declare("resid_mid_cross", "B, T, d");
  }
  if (ff) ff->attach_hooks(table, prefix + "mlp.");
  hooks_.declare("resid_post", "B, T, d");
}

// ---- TokenHead ---------------------------------------------------------------

TokenHead::TokenHead(int64_t d, int64_t vocab_size, bool tied, Rng& init, bool bias) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  auto uniform = [&](Shape shape) {
    Tensor t(std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(init.uniform(-bound, bound));
    return t;
  };
  if (!tied) weight = register_parameter("weight", uniform({vocab_size, d}));
  if (bias) this->bias = register_parameter("bias", uniform({vocab_size}));
}

Var TokenHead::forward(const Var& x, const Var& embedding) const {
  const Var& w = weight.defined() ? weight : embedding;
  if (!w.defined()) throw ValueError("TokenHead: a tied head needs the embedding table");
  return linear(x, w, bias);
}

}  // namespace attnlab
