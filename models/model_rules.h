#pragma once
// The rules that tie a model's options together (heads divide the width,
// rope needs an even head width, ...), each written once and worded either in
// JSON keys (a config or checkpoint: "n_heads 3 does not divide d_model 64")
// or in flags (attnlab train: "--heads 3 does not divide --d-model 64").
// TransformerConfig::validate applies them with JSON names; finalize
// (training/settings.h) with flag names, before its own rules of a run.
#include "models/config.h"

namespace attnlab {

// ValueError for the first rule `c` breaks, in this order: the integers'
// bounds, heads dividing d_model, d_k/d_v with parameter-free attention,
// attn_scale, the real numbers' bounds, random positions, layout bare, rope,
// init_std with a scheme other than gpt2.
void check_model_rules(const TransformerConfig& c, Naming naming);

// Single rules that finalize also needs before the others:
// random_positions is 0 or positive, and only of sinusoidal or learned positions;
void check_random_positions_kind(const TransformerConfig& c, Naming naming);
// layout bare applies to the decoder only.
void check_layout_arch(const TransformerConfig& c, Naming naming);

}  // namespace attnlab
