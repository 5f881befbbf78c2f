// Gradient checks of the whole models (float64 engine): the loss
// cross_entropy(model(batch), targets) against every parameter, by central
// differences (tests/gradcheck/gradcheck.h states the tolerance: 1e-6
// relative with a 1e-8 absolute floor, h = 1e-6), and their Hessian-vector
// products against differences of gradients (hvpcheck). The sizes are tiny
// (V 7, d 8, h 2, L 2, d_ff 16, T <= 5) so each check takes a fraction of a second.
#include "tests/gradcheck/gradcheck.h"

#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"

using namespace attnlab;
using attnlab::testing::gradcheck;

namespace {

TransformerConfig tiny(const std::string& arch) { return testing::model_config(arch, 7, 8, 8, 2, 2, 16); }

// Unequal lengths, so every batch has padding (src and/or target side).
TokenPairs tiny_pairs(Arch arch) {
  if (arch == Arch::encoder) return {{{4, 5, 6, 4, 5}, {5, 4, 6, 5, 4}}, {{6, 4, 5}, {4, 5}}};
  if (arch == Arch::decoder) return {{{4, 5}, {5, 4}}, {{6}, {4}}};  // T = 5 and 3
  return {{{4, 5, 6, 4}, {6, 5, 4}}, {{5, 6}, {4}}};
}

void check_model(const TransformerConfig& config, Real label_smoothing = 0) {
  auto model = make_model(config, /*seed=*/11);
  const FormattedBatch batch = format_batch(batch_format(config, false), tiny_pairs(config.arch));
  CrossEntropyOptions ce;
  ce.label_smoothing = label_smoothing;
  // The parameters are the gradcheck inputs; the model reads the same Vars, so
  // perturbing an input's value perturbs the model.
  auto fn = [&](const std::vector<Var>&) { return cross_entropy(model->forward(batch.input), batch.targets, ce); };
  INFO("config " << config.to_json().dump());
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(fn, model->parameters()));
  // And the second derivative: Hv along a random direction of all parameters.
  ATTNLAB_REQUIRE_GRADCHECK(hvpcheck(fn, model->parameters()));
}

}  // namespace

TEST_CASE("encoder tagger gradients: pre-LN, sinusoidal, sqrt scale, padding", "[gradcheck][models]") {
  check_model(tiny("encoder"));
}

TEST_CASE("encoder tagger gradients: post-LN, learned positions, linear scale, gelu, tied", "[gradcheck][models]") {
  TransformerConfig c = tiny("encoder");
  c.norm = Norm::post;
  c.positional = Positional::learned;
  c.attn_scale = "linear";
  c.activation = Activation::gelu;
  c.tie_embeddings = true;
  check_model(c);
}

TEST_CASE("encoder tagger gradients: parameter-free attention, no positions", "[gradcheck][models]") {
  TransformerConfig c = tiny("encoder");
  c.parameter_free_attention = true;
  c.positional = Positional::none;
  check_model(c);
}

TEST_CASE("decoder LM gradients: pre-LN, rope, scale none, causal + padding", "[gradcheck][models]") {
  TransformerConfig c = tiny("decoder");
  c.positional = Positional::rope;
  c.attn_scale = "none";
  check_model(c);
}

TEST_CASE("decoder LM gradients: post-LN, sinusoidal, numeric scale, tied, label smoothing", "[gradcheck][models]") {
  TransformerConfig c = tiny("decoder");
  c.norm = Norm::post;
  c.attn_scale = "0.7";
  c.tie_embeddings = true;
  check_model(c, 0.1);
}

TEST_CASE("encoder-decoder gradients: pre-LN, learned positions, tied, d_k != d_v", "[gradcheck][models]") {
  TransformerConfig c = tiny("seq2seq");
  c.positional = Positional::learned;
  c.tie_embeddings = true;
  c.d_k = 3;
  c.d_v = 5;
  check_model(c);
}

TEST_CASE("encoder-decoder gradients: post-LN, rope, linear scale, gelu, label smoothing", "[gradcheck][models]") {
  TransformerConfig c = tiny("seq2seq");
  c.norm = Norm::post;
  c.positional = Positional::rope;
  c.attn_scale = "linear";
  c.activation = Activation::gelu;
  check_model(c, 0.1);
}

// The papers' options (models/config.h): no LayerNorm, attention-only blocks, no biases.

TEST_CASE("encoder tagger gradients: no norms, attention-only, no biases", "[gradcheck][models]") {
  TransformerConfig c = tiny("encoder");
  c.norm = Norm::none;
  c.attention_only = true;
  c.no_bias = true;
  check_model(c);
}

TEST_CASE("decoder LM gradients: no norms, learned positions, tied, gelu", "[gradcheck][models]") {
  TransformerConfig c = tiny("decoder");
  c.norm = Norm::none;
  c.positional = Positional::learned;
  c.tie_embeddings = true;
  c.activation = Activation::gelu;
  check_model(c);
}

TEST_CASE("decoder LM gradients: attention-only, no biases, rope", "[gradcheck][models]") {
  TransformerConfig c = tiny("decoder");
  c.attention_only = true;
  c.no_bias = true;
  c.positional = Positional::rope;
  check_model(c);
}

TEST_CASE("encoder-decoder gradients: no norms, attention-only, no biases, tied", "[gradcheck][models]") {
  TransformerConfig c = tiny("seq2seq");
  c.norm = Norm::none;
  c.attention_only = true;
  c.no_bias = true;
  c.tie_embeddings = true;
  check_model(c);
}

TEST_CASE("encoder-decoder gradients: post-LN attention-only (ln1, ln2 around the two attentions)",
          "[gradcheck][models]") {
  TransformerConfig c = tiny("seq2seq");
  c.norm = Norm::post;
  c.attention_only = true;
  check_model(c);
}

TEST_CASE("encoder-decoder gradients: no biases with the feed-forward, gelu", "[gradcheck][models]") {
  TransformerConfig c = tiny("seq2seq");
  c.no_bias = true;
  c.activation = Activation::gelu;
  check_model(c);
}
