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
  o.dropout = static_cast<Real>(c.attn_dropout);
  o.rope = rope;
  return o;
}

// ---- EncoderBlock ------------------------------------------------------------

EncoderBlock::EncoderBlock(const TransformerConfig& c, Rng& init, Rng& dropout_rng) : pre_norm_(c.norm == Norm::pre) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(c.d_model));
  attn = register_module("attn", std::make_shared<MultiHeadAttention>(
                                     attention_options(c, c.positional == Positional::rope), init, dropout_rng));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(c.d_model));
  ff = register_module("ff", std::make_shared<FeedForward>(c.d_model, c.d_ff, c.activation,
                                                           static_cast<Real>(c.dropout), init, dropout_rng));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(static_cast<Real>(c.dropout), dropout_rng));
}

Var EncoderBlock::forward(const Var& input, const Tensor* key_padding) {
  const Var x = hooks_.pass("resid_pre", input);
  if (pre_norm_) {
    Var h = hooks_.pass("resid_mid", x + dropout_->forward(attn->forward(ln1->forward(x), Var(), false, key_padding)));
    return hooks_.pass("resid_post", h + dropout_->forward(ff->forward(ln2->forward(h))));
  }
  Var h = hooks_.pass("resid_mid", ln1->forward(x + dropout_->forward(attn->forward(x, Var(), false, key_padding))));
  return hooks_.pass("resid_post", ln2->forward(h + dropout_->forward(ff->forward(h))));
}

void EncoderBlock::attach_hooks(HookTable& table, const std::string& prefix) {
  hooks_.attach(table, prefix);
  hooks_.declare("resid_pre", "B, T, d");
  attn->attach_hooks(table, prefix + "attn.");
  hooks_.declare("resid_mid", "B, T, d");
  ff->attach_hooks(table, prefix + "mlp.");
  hooks_.declare("resid_post", "B, T, d");
}

// ---- DecoderBlock ------------------------------------------------------------

DecoderBlock::DecoderBlock(const TransformerConfig& c, bool cross_attention, Rng& init, Rng& dropout_rng)
    : pre_norm_(c.norm == Norm::pre) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(c.d_model));
  self_attn = register_module(cross_attention ? "self_attn" : "attn",
                              std::make_shared<MultiHeadAttention>(attention_options(c, c.positional == Positional::rope),
                                                                   init, dropout_rng));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(c.d_model));
  if (cross_attention) {
    cross_attn = register_module(
        "cross_attn", std::make_shared<MultiHeadAttention>(attention_options(c, false), init, dropout_rng));
    ln3 = register_module("ln3", std::make_shared<LayerNorm>(c.d_model));
  }
  ff = register_module("ff", std::make_shared<FeedForward>(c.d_model, c.d_ff, c.activation,
                                                           static_cast<Real>(c.dropout), init, dropout_rng));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(static_cast<Real>(c.dropout), dropout_rng));
}

Var DecoderBlock::forward(const Var& input, const Tensor* self_padding, const Var& memory,
                          const Tensor* memory_padding) {
  if (cross_attn && !memory.defined())
    throw ValueError("DecoderBlock: a block with cross-attention needs the encoder memory");
  // The norm in front of the feed-forward: ln3 with cross-attention, else ln2.
  LayerNorm& ff_norm = cross_attn ? *ln3 : *ln2;
  auto self = [&](const Var& in) { return dropout_->forward(self_attn->forward(in, Var(), true, self_padding)); };
  auto cross = [&](const Var& in) {
    return dropout_->forward(cross_attn->forward(in, memory, false, memory_padding));
  };
  auto feed = [&](const Var& in) { return dropout_->forward(ff->forward(in)); };
  const Var x = hooks_.pass("resid_pre", input);
  Var h;
  if (pre_norm_) {
    h = hooks_.pass("resid_mid", x + self(ln1->forward(x)));
    if (cross_attn) h = hooks_.pass("resid_mid_cross", h + cross(ln2->forward(h)));
    return hooks_.pass("resid_post", h + feed(ff_norm.forward(h)));
  }
  h = hooks_.pass("resid_mid", ln1->forward(x + self(x)));
  if (cross_attn) h = hooks_.pass("resid_mid_cross", ln2->forward(h + cross(h)));
  return hooks_.pass("resid_post", ff_norm.forward(h + feed(h)));
}

void DecoderBlock::attach_hooks(HookTable& table, const std::string& prefix) {
  hooks_.attach(table, prefix);
  hooks_.declare("resid_pre", "B, T, d");
  self_attn->attach_hooks(table, prefix + (cross_attn ? "self_attn." : "attn."));
  hooks_.declare("resid_mid", "B, T, d");
  if (cross_attn) {
    cross_attn->attach_hooks(table, prefix + "cross_attn.");
    hooks_.declare("resid_mid_cross", "B, T, d");
  }
  ff->attach_hooks(table, prefix + "mlp.");
  hooks_.declare("resid_post", "B, T, d");
}

// ---- TokenHead ---------------------------------------------------------------

TokenHead::TokenHead(int64_t d, int64_t vocab_size, bool tied, Rng& init) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  auto uniform = [&](Shape shape) {
    Tensor t(std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(init.uniform(-bound, bound));
    return t;
  };
  if (!tied) weight = register_parameter("weight", uniform({vocab_size, d}));
  bias = register_parameter("bias", uniform({vocab_size}));
}

Var TokenHead::forward(const Var& x, const Var& embedding) const {
  const Var& w = weight.defined() ? weight : embedding;
  if (!w.defined()) throw ValueError("TokenHead: a tied head needs the embedding table");
  return linear(x, w, bias);
}

}  // namespace attnlab
