#pragma once
// A model whose weights are set by hand, so that what each component does is
// known by construction: the checks of ablation, patching and the logit lens
// (docs/interventions.md) compare with it.
//
// An encoder tagger over 4 symbols (ids 4-7, V = 8), 6 positions, one pre-LN
// block with two heads, d = 22: the residual stream has a token subspace
// (dims 0-7, one-hot id), a position subspace (dims 8-13, one-hot position)
// and an answer subspace (dims 14-21) that the output head reads.
//   head 0 (blocks.0.attn.h0) attends from position p to p - 1 (position 0 to
//          itself) and writes that token's one-hot into the answer subspace:
//          the model outputs the previous token, input[max(p - 1, 0)].
//   head 1 (blocks.0.attn.h1) attends from p to itself and writes nothing (its
//          columns of out_proj are zero): knocking it out changes no logit.
//   the MLP (blocks.0.mlp) has zero weights and biases: its output is 0.
// Every input token has exactly two ones in the stream (its id, its position),
// so ln1 maps it to a·x − c with the same a, c for every input; the query,
// key and value biases add c back, so each projection reads a clean one-hot.
#include <cmath>
#include <memory>
#include <vector>

#include "datasets/task.h"
#include "models/sequence_model.h"

namespace attnlab::testing {

constexpr int64_t kHandSymbols = 4, kHandV = 8, kHandPositions = 6, kHandWidth = 22;

inline std::unique_ptr<SequenceModel> previous_token_model() {
  TransformerConfig c;
  c.arch = Arch::encoder;
  c.vocab_size = kHandV;
  c.max_len = kHandPositions;
  c.d_model = kHandWidth;
  c.n_heads = 2;
  c.n_layers = 1;
  c.d_ff = 4;
  c.d_k = kHandPositions;
  c.d_v = kHandV;
  c.positional = Positional::learned;
  c.norm = Norm::pre;
  std::unique_ptr<SequenceModel> model = make_model(c, 1);
  for (auto& [name, p] : model->named_parameters()) p.value().fill_(0);
  auto set = [&](const std::string& name, int64_t row, int64_t col, double v) {
    Tensor& t = model->parameter(name).value();
    t[row * (t.shape().size() > 1 ? t.size(1) : 1) + col] = static_cast<Real>(v);
  };
  const int64_t pos0 = kHandV, answer0 = kHandV + kHandPositions;  // first dims of the subspaces
  // ln1 of a stream with two ones among d dims (eps as LayerNorm's default).
  const double mean = 2.0 / kHandWidth;
  const double var = (2 * (1 - mean) * (1 - mean) + (kHandWidth - 2) * mean * mean) / kHandWidth;
  const double a = 1 / std::sqrt(var + 1e-5), shift = mean * a, beta = 9 / a;  // q·k = (beta·a)² = 81
  for (int64_t v = 0; v < kHandV; ++v) set("tok_emb.weight", v, v, 1);
  for (int64_t p = 0; p < kHandPositions; ++p) set("pos_emb.weight", p, pos0 + p, 1);
  for (const char* ln : {"blocks.0.ln1.weight", "blocks.0.ln2.weight", "ln_f.weight"})
    for (int64_t i = 0; i < kHandWidth; ++i) set(ln, 0, i, 1);
  for (int64_t r = 0; r < kHandPositions; ++r) {
    // head 0: query row r = position r; key row r = position r − 1 (row 0 also position 0)
    set("blocks.0.attn.q_proj.weight", r, pos0 + r, beta);
    set("blocks.0.attn.k_proj.weight", r, pos0 + std::max<int64_t>(r - 1, 0), beta);
    // head 1: query and key row r = position r (each position attends to itself)
    set("blocks.0.attn.q_proj.weight", kHandPositions + r, pos0 + r, beta);
    set("blocks.0.attn.k_proj.weight", kHandPositions + r, pos0 + r, beta);
  }
  for (int64_t r = 0; r < 2 * kHandPositions; ++r) {
    set("blocks.0.attn.q_proj.bias", 0, r, beta * shift);
    set("blocks.0.attn.k_proj.bias", 0, r, beta * shift);
  }
  for (int64_t i = 0; i < kHandV; ++i)
    for (int64_t hh = 0; hh < 2; ++hh) {
      set("blocks.0.attn.v_proj.weight", hh * kHandV + i, i, 1);
      set("blocks.0.attn.v_proj.bias", 0, hh * kHandV + i, shift);
    }
  for (int64_t i = 0; i < kHandV; ++i) {
    set("blocks.0.attn.out_proj.weight", answer0 + i, i, 1);  // head 0's columns only
    set("head.weight", i, answer0 + i, 1);
  }
  return model;
}

// Examples of the hand-built model's task: `count` inputs of 6 symbols drawn
// from `seed`, each answered by the previous token (position 0: itself).
inline std::vector<Example> previous_token_examples(int64_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<Example> out;
  for (int64_t n = 0; n < count; ++n) {
    Example e;
    for (int64_t p = 0; p < kHandPositions; ++p)
      e.input.push_back(static_cast<int32_t>(SpecialTokens::count + rng.integer(0, kHandSymbols - 1)));
    for (int64_t p = 0; p < kHandPositions; ++p) e.output.push_back(e.input[static_cast<size_t>(std::max<int64_t>(p - 1, 0))]);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace attnlab::testing
