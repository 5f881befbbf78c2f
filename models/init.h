#pragma once
// Initialisation schemes of the models (TransformerConfig::init).
//
// "torch": each layer's PyTorch module default, drawn while the layer is built
//   (Linear and the head: U(±1/√fan_in) for weight and bias; Embedding N(0, 1);
//   learned positions N(0, 0.02); LayerNorm weight 1, bias 0).
// "gpt2": the GPT-2 scheme, drawn over the built model in parameter order,
//   at standard deviation s = init_std (0.02 unless set):
//   every Linear weight and the head's weight N(0, s²), their biases 0;
//   the residual output projections (attention out_proj, the feed-forward's
//   fc2) N(0, s²/N) with N the residual branches of their stack (2 per
//   block; 3 per block in seq2seq's decoder, which adds cross-attention; one
//   fewer per block attention-only);
//   token embeddings and learned positions N(0, s²); LayerNorm weight 1,
//   bias 0. A tied head is the token embedding and is drawn once, as it.
//   Without biases (no_bias) there are none to set.
#include <cstdint>
#include <string>

#include "framework/nn/module.h"
#include "framework/random.h"
#include "models/config.h"

namespace attnlab {

// The scheme `config` is built with: its init, or for "auto" the one that
// matches the token embeddings' scale to the positions' (docs/experiments.md,
// "Which initialisation"): gpt2 with learned positions (N(0, 0.02) rows beside
// N(0, 0.02) tokens), torch otherwise (N(0, 1) tokens beside sinusoids of
// amplitude 1; with rope or no positions the study found torch as good or better).
InitScheme resolved_init(const TransformerConfig& config);

// Redraws `model`'s parameters by the GPT-2 scheme from `rng`. `config` is
// the model's own (its arch and layers give each stack's residual branches).
void apply_gpt2_init(Module& model, const TransformerConfig& config, Rng& rng);

}  // namespace attnlab
