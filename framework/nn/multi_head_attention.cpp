#include "framework/nn/multi_head_attention.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "framework/ops/composed.h"
#include "framework/ops/dropout.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/matmul.h"
#include "framework/ops/rotary.h"
#include "framework/ops/shape.h"
#include "framework/ops/softmax.h"

namespace attnlab {

// ---- AttentionScale --------------------------------------------------------

Real AttentionScale::value(int64_t d_k) const {
  switch (kind) {
    case Kind::inv_sqrt: return static_cast<Real>(1.0 / std::sqrt(static_cast<double>(d_k)));
    case Kind::none: return 1;
    case Kind::inv_linear: return static_cast<Real>(1.0 / static_cast<double>(d_k));
    case Kind::constant: return constant;
  }
  return 1;
}

std::string AttentionScale::str() const {
  switch (kind) {
    case Kind::inv_sqrt: return "sqrt";
    case Kind::none: return "none";
    case Kind::inv_linear: return "linear";
    case Kind::constant: break;
  }
  std::ostringstream out;
  out.precision(17);
  out << static_cast<double>(constant);
  return out.str();
}

AttentionScale parse_attention_scale(const std::string& text) {
  AttentionScale s;
  if (text == "sqrt") return s;
  if (text == "none") {
    s.kind = AttentionScale::Kind::none;
    return s;
  }
  if (text == "linear") {
    s.kind = AttentionScale::Kind::inv_linear;
    return s;
  }
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || !std::isfinite(v) || !(v > 0))
    throw ValueError("unknown attention scale '" + text + "': expected sqrt, none, linear or a positive number");
  s.kind = AttentionScale::Kind::constant;
  s.constant = static_cast<Real>(v);
  return s;
}

// ---- MultiHeadAttention ----------------------------------------------------

namespace {

std::string num(int64_t v) { return std::to_string(v); }

MultiHeadAttentionOptions resolve(MultiHeadAttentionOptions o) {
  const std::string who = "MultiHeadAttention: ";
  if (o.d_model <= 0) throw ValueError(who + "d_model must be positive, got d = " + num(o.d_model));
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw ValueError(who + "dropout must lie in [0, 1), got " + std::to_string(o.dropout));
  if (o.kv_dim < 0) throw ValueError(who + "kv_dim must be positive (or 0 for d), got " + num(o.kv_dim));
  if (o.kv_dim == 0) o.kv_dim = o.d_model;
  if (!o.projections) {
    if (o.kv_dim != o.d_model)
      throw ValueError(who + "parameter-free attention outputs an average of the memory rows, so kv_dim must equal "
                             "d, got kv_dim = " + num(o.kv_dim) + ", d = " + num(o.d_model));
    o.n_heads = 1;
    o.d_k = o.d_v = o.d_model;
  } else {
    if (o.n_heads <= 0) throw ValueError(who + "n_heads must be positive, got h = " + num(o.n_heads));
    if (o.d_k < 0 || o.d_v < 0)
      throw ValueError(who + "d_k and d_v must be positive (or 0 for d/h), got d_k = " + num(o.d_k) +
                       ", d_v = " + num(o.d_v));
    if ((o.d_k == 0 || o.d_v == 0) && o.d_model % o.n_heads != 0)
      throw ValueError(who + "h = " + num(o.n_heads) + " heads do not divide d = " + num(o.d_model) +
                       " (d_k and d_v default to d/h); choose h dividing d or set d_k and d_v");
    if (o.d_k == 0) o.d_k = o.d_model / o.n_heads;
    if (o.d_v == 0) o.d_v = o.d_model / o.n_heads;
  }
  if (o.rope) check_rotary_width(o.d_k);
  return o;
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options, Rng& init, Rng& dropout_rng)
    : opt_(resolve(options)), scale_(opt_.scale.value(opt_.d_k)), dropout_rng_(&dropout_rng) {
  if (!opt_.projections) return;
  const int64_t d = opt_.d_model, h = opt_.n_heads;
  const bool b = opt_.bias;
  q_proj = register_module("q_proj", std::make_shared<Linear>(d, h * opt_.d_k, init, b));
  k_proj = register_module("k_proj", std::make_shared<Linear>(opt_.kv_dim, h * opt_.d_k, init, b));
  v_proj = register_module("v_proj", std::make_shared<Linear>(opt_.kv_dim, h * opt_.d_v, init, b));
  out_proj = register_module("out_proj", std::make_shared<Linear>(h * opt_.d_v, d, init, b));
}

// Fused projections. Self-attention projects one input three times, so its
// Q, K and V are one product of width h·(2·d_k + d_v) over the stacked weights
// (stacked_forward), which the fused kernel reads in place (attention_packed)
// and the other paths split into three (B, T, h·w) tensors; cross-attention
// projects the memory twice, so K and V are one product and Q its own.
// Why three parameters stacked per call, not one (h·(2·d_k + d_v), d) parameter
// whose rows are viewed as q_proj, k_proj and v_proj: a Tensor owns its storage
// (there are no views into another's), and three parameters keep the names,
// shapes, init order, optimizer state, clipping and checkpoint format exactly as
// they were. The price is one copy of the weights forward and of their gradient
// backward: with B·T rows, about 1/(B·T) of the product's multiply-adds.
MultiHeadAttention::Projections MultiHeadAttention::project_memory(const Var& memory) const {
  const int64_t wk = opt_.n_heads * opt_.d_k, wv = opt_.n_heads * opt_.d_v;
  std::vector<Var> kv = split(stacked_forward({k_proj.get(), v_proj.get()}, memory), -1, {wk, wv});
  return {Var(), kv[0], kv[1]};
}

MultiHeadAttention::Projections MultiHeadAttention::project(const Var& x, const Var& memory) const {
  const int64_t wk = opt_.n_heads * opt_.d_k, wv = opt_.n_heads * opt_.d_v;
  if (memory.defined() && memory.node() != x.node()) {
    Projections p = project_memory(memory);
    p.q = q_proj->forward(x);
    return p;
  }
  std::vector<Var> qkv = split(stacked_forward({q_proj.get(), k_proj.get(), v_proj.get()}, x), -1, {wk, wk, wv});
  return {qkv[0], qkv[1], qkv[2]};
}

Var MultiHeadAttention::forward(const Var& x, const Var& memory, bool causal, const Tensor* key_padding) {
  const int64_t d = opt_.d_model;
  if (x.dim() != 3 || x.size(2) != d)
    throw ShapeError("MultiHeadAttention: expected x of shape (B, T_q, " + num(d) + "), got " + x.value().shape_str());
  const Var& mem = memory.defined() ? memory : x;
  const int64_t b = x.size(0);
  if (mem.dim() != 3 || mem.size(0) != b || mem.size(2) != opt_.kv_dim)
    throw ShapeError("MultiHeadAttention: memory of shape " + mem.value().shape_str() + " does not fit: expected (" +
                     num(b) + ", T_k, kv_dim = " + num(opt_.kv_dim) + ") for x of shape " + x.value().shape_str());
  const int64_t t_k = mem.size(1);
  if (key_padding) check_shape(key_padding->shape(), {b, t_k}, "MultiHeadAttention key_padding (B, T_k)");

  AttentionMask mask;
  mask.causal = causal;
  mask.key_padding = key_padding;
  const bool weight_dropout = training() && opt_.dropout > 0;
  // Only the composed path has the scores, and a pattern to replace, as Vars.
  const bool composed =
      weight_dropout || hooks_.observed("scores") || hooks_.replaced("scores") || hooks_.replaced("pattern");
  Tensor weights;  // (B, h, T_q, T_k), copied out of a fused kernel when the pattern is observed
  Tensor* weights_out = !composed && hooks_.observed("pattern") ? &weights : nullptr;
  const bool self_attention = !memory.defined() || memory.node() == x.node();
  if (opt_.projections && !opt_.rope && !composed && self_attention) {
    // The fused kernel reads the heads straight from the one Q/K/V product, unsplit.
    const Var qkv = stacked_forward({q_proj.get(), k_proj.get(), v_proj.get()}, x);  // (B, T, h·(2·d_k + d_v))
    return output(attention_packed(qkv, opt_.n_heads, opt_.d_k, opt_.d_v, scale_, mask, weights_out), weights_out);
  }
  // Otherwise the heads stay where the projections wrote them too: q (B, T_q, h·d_k),
  // k (B, T_k, h·d_k), v (B, T_k, h·d_v); without projections one head over the
  // inputs, whose average is of the (unrotated) memory rows.
  Var q = x, k = mem, v = mem;
  if (opt_.projections) {
    const Projections p = project(x, memory);
    q = p.q, k = p.k, v = p.v;
  }
  if (opt_.rope) {
    q = rotary_heads(q, opt_.n_heads);
    k = rotary_heads(k, opt_.n_heads);
  }
  Var ctx;  // (B, T_q, h·d_v)
  if (composed) {
    const int64_t h = opt_.n_heads;
    ctx = merge_heads(composed_attention(split_heads(q, h), split_heads(k, h),
                                         split_heads(v, h), scale_, mask, opt_.dropout, dropout_rng_,
                                         weight_dropout, nullptr, &hooks_));
  } else {
    ctx = attention_heads(q, k, v, opt_.n_heads, scale_, mask, weights_out);
  }
  return output(std::move(ctx), weights_out);  // (B, T_q, d)
}

Var MultiHeadAttention::output(Var ctx, const Tensor* weights) const {
  if (weights) hooks_.pass("pattern", Var(*weights));  // observers only: a replacement takes the composed path
  ctx = hooks_.pass("z", std::move(ctx));
  return hooks_.pass("out", opt_.projections ? out_proj->forward(ctx) : ctx);
}

void MultiHeadAttention::attach_hooks(HookTable& table, const std::string& prefix) {
  hooks_.attach(table, prefix);
  hooks_.declare("scores", "B, h, T_q, T_k");
  hooks_.declare("pattern", "B, h, T_q, T_k");
  hooks_.declare("z", "B, T_q, h*d_v");
  hooks_.declare("out", "B, T_q, d");
}

Var composed_attention(const Var& q, const Var& k, const Var& v, Real s, const AttentionMask& mask, Real dropout_p,
                       Rng* dropout_rng, bool training, Tensor* weights_out, const HookSite* hooks) {
  Var scores = masked_scores(q, k, s, mask);  // (B, h, T_q, T_k)
  if (hooks) scores = hooks->pass("scores", std::move(scores));
  Var w = softmax(scores);
  if (hooks) w = hooks->pass("pattern", std::move(w));
  if (weights_out) *weights_out = w.value();
  if (training && dropout_p > 0) w = dropout(w, dropout_p, *dropout_rng, true);
  return matmul(w, v);  // (B, h, T_q, d_v)
}

}  // namespace attnlab
