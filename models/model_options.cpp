#include "models/model_options.h"

#include <cmath>
#include <sstream>

#include "framework/error.h"

namespace attnlab {

namespace {

using C = TransformerConfig;

std::string text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// `real`: the field is a real number (a count's flag must be >= 1, a real's > 0).
void check_bound(const ModelOption& o, double value, const std::string& shown, Naming naming, bool real) {
  const std::string name = option_name(o, naming);
  const bool flag = naming == Naming::flag;
  const std::string positive = real ? " must be finite and > 0" : flag ? " must be >= 1" : " must be positive";
  if (o.bound == Bound::positive && (!(value > 0) || !std::isfinite(value)))
    throw ValueError(name + positive + ", got " + shown);
  if (o.bound == Bound::positive_or_auto && !(value >= 0))
    throw ValueError(name + positive + " (or 0 for " + option_name(*model_option("d_model"), naming) + " / " +
                     option_name(*model_option("n_heads"), naming) + "), got " + shown);
  if (o.bound == Bound::fraction && !(value >= 0 && value < 1))
    throw ValueError(name + " must be in [0, 1), got " + shown);
}

}  // namespace

std::string option_name(const ModelOption& o, Naming naming) {
  return naming == Naming::json ? std::string(o.key) : "--" + std::string(o.flag);
}

const std::vector<ModelOption>& model_options() {
  static const std::vector<ModelOption> options = {
      {"arch", "model", &C::arch, Bound::none, "{}"},
      {"vocab_size", "", &C::vocab_size, Bound::positive, "vocab_size (from the task options)"},
      {"max_len", "", &C::max_len, Bound::none, "positions (the positional table)"},
      {"d_model", "d-model", &C::d_model, Bound::positive, "model width d"},
      {"n_heads", "heads", &C::n_heads, Bound::positive, "attention heads h"},
      {"n_layers", "layers", &C::n_layers, Bound::positive, "blocks L (per stack for seq2seq)"},
      {"d_ff", "d-ff", &C::d_ff, Bound::positive, "feed-forward hidden width (not with --attention-only)"},
      {"d_k", "d-k", &C::d_k, Bound::positive_or_auto, "query/key width per head; 0 = d/h"},
      {"d_v", "d-v", &C::d_v, Bound::positive_or_auto, "value width per head; 0 = d/h"},
      {"positional", "positional", &C::positional, Bound::none, "{}"},
      {"random_positions", "random-positions", &C::random_positions, Bound::none,
       "P > 0: randomised positions (sinusoidal, learned): in training each sequence reads a sorted random "
       "subset of the positions [0, P), in evaluation an even spread over [0, P); the table has P rows "
       "(--positions P or unset); 0 = off (docs/length.md)"},
      {"norm", "norm", &C::norm, Bound::none, "{}"},
      {"attn_scale", "attn-scale", &C::attn_scale, Bound::none,
       "attention logit scale: sqrt (1/sqrt(d_k)) | none | linear (1/d_k) | a number"},
      {"activation", "activation", &C::activation, Bound::none, "feed-forward activation: {}"},
      {"attention_only", "attention-only", &C::attention_only, Bound::none,
       "blocks of attention only: no feed-forward nor its norm, so --d-ff and --activation do not apply and the "
       "blocks have no mlp.* hook points (Olsson et al.'s induction-head models)"},
      {"dropout", "dropout", &C::dropout, Bound::fraction,
       "dropout on embeddings, sublayer outputs and inside the feed-forward"},
      {"attn_dropout", "attn-dropout", &C::attn_dropout, Bound::fraction, "dropout on attention weights"},
      {"init", "init", &C::init, Bound::none, "initial weights: {}"},
      {"init_std", "init-std", &C::init_std, Bound::positive,
       "standard deviation s of --init gpt2: weights and embeddings N(0, s^2), residual output projections "
       "N(0, s^2/(2 x layers)); 0.02 is GPT-2's, about 1/sqrt(d) Nanda et al.'s grokking model"},
      {"tie_embeddings", "tie-embeddings", &C::tie_embeddings, Bound::none,
       "output projection shares the input embedding"},
      {"parameter_free_attention", "parameter-free-attention", &C::parameter_free_attention, Bound::none,
       "attention without Q/K/V/O projections (softmax(x_i . x_j) weights over the inputs); its scores are "
       "symmetric and peak on the diagonal, so it cannot solve reverse with the encoder or copy with the decoder"},
      {"no_bias", "no-bias", &C::no_bias, Bound::none,
       "no bias in attention's q/k/v/out projections, the feed-forward or the output head; LayerNorm keeps its "
       "beta (Nanda et al.'s grokking model)"},
      {"layout", "layout", &C::layout, Bound::none, "decoder sequence layout: {}"},
  };
  return options;
}

const ModelOption* model_option(const std::string& key) {
  for (const ModelOption& o : model_options())
    if (key == o.key) return &o;
  return nullptr;
}

void check_bounds(const TransformerConfig& c, Naming naming, bool reals) {
  for (const ModelOption& o : model_options()) {
    if (o.bound == Bound::none || (naming == Naming::flag && o.flag[0] == '\0')) continue;
    if (auto* field = std::get_if<int64_t C::*>(&o.field); field && !reals) {
      const int64_t v = c.*(*field);
      check_bound(o, static_cast<double>(v), std::to_string(v), naming, false);
    }
    if (auto* field = std::get_if<double C::*>(&o.field); field && reals)
      check_bound(o, c.*(*field), text(c.*(*field)), naming, true);
  }
}

void check_rope_width(const TransformerConfig& c, Naming naming) {
  // Parameter-free attention is one head over the whole width (see MultiHeadAttentionOptions).
  const int64_t rotated = c.parameter_free_attention ? c.d_model : c.head_dim_k();
  if (c.positional != Positional::rope || rotated % 2 == 0) return;
  if (naming == Naming::flag)
    throw ValueError("--positional rope rotates pairs of channels and needs an even query/key width per head "
                     "(--d-k, or --d-model / --heads), got " + std::to_string(rotated));
  throw ValueError("positional 'rope' rotates pairs of channels and needs an even d_k, got d_k = " +
                   std::to_string(rotated));
}

}  // namespace attnlab
