#include "models/init.h"

#include <cmath>

#include "framework/nn/embedding.h"
#include "framework/nn/linear.h"
#include "framework/nn/positional.h"
#include "models/blocks.h"

namespace attnlab {

namespace {

void fill_normal(Var& p, double stddev, Rng& rng) {
  Tensor& t = p.value();
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.normal(0.0, stddev));
}

void fill_zero(Var& p) {
  if (p.defined()) p.value().zero_();
}

// `name` is the module's own name within its parent; `stddev` the scheme's
// standard deviation, `residual_std` that of the residual output projections
// of its stack.
void init_module(Module& m, const std::string& name, double stddev, double residual_std, Rng& rng) {
  if (auto* linear = dynamic_cast<Linear*>(&m)) {
    const bool residual_output = name == "out_proj" || name == "fc2";
    fill_normal(linear->weight, residual_output ? residual_std : stddev, rng);
    fill_zero(linear->bias);
    return;
  }
  if (auto* head = dynamic_cast<TokenHead*>(&m)) {
    if (head->weight.defined()) fill_normal(head->weight, stddev, rng);
    fill_zero(head->bias);
    return;
  }
  if (auto* embedding = dynamic_cast<Embedding*>(&m)) {
    fill_normal(embedding->weight, stddev, rng);
    return;
  }
  if (auto* positions = dynamic_cast<LearnedPositional*>(&m)) {
    fill_normal(positions->weight, stddev, rng);
    return;
  }
  for (const auto& [child_name, child] : m.children()) init_module(*child, child_name, stddev, residual_std, rng);
}

}  // namespace

InitScheme resolved_init(const TransformerConfig& config) {
  if (config.init != InitScheme::automatic) return config.init;
  return config.positional == Positional::learned ? InitScheme::gpt2 : InitScheme::torch;
}

void apply_gpt2_init(Module& model, const TransformerConfig& config, Rng& rng) {
  const auto residual_std = [&](int64_t branches_per_block) {
    return config.init_std / std::sqrt(static_cast<double>(branches_per_block * config.n_layers));
  };
  // The stacks are the top-level children "blocks" (encoder, decoder) or
  // "encoder" and "decoder" (seq2seq); the rest (embeddings, final norm,
  // head) has no residual projection, so its std argument is unused.
  // A block's branches: each attention, and the feed-forward unless attention-only.
  const int64_t feed_forward = config.attention_only ? 0 : 1;
  for (const auto& [name, child] : model.children()) {
    const bool cross_attending = config.arch == Arch::seq2seq && name == "decoder";
    init_module(*child, name, config.init_std, residual_std((cross_attending ? 2 : 1) + feed_forward), rng);
  }
}

}  // namespace attnlab
