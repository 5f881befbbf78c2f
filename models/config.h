#pragma once
// TransformerConfig: every architectural choice of the three model shapes, in
// one plain struct that round-trips through JSON (run directories, checkpoints,
// the PyTorch parity fixtures).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace attnlab {

struct TransformerConfig {
  std::string arch = "encoder";  // "encoder" (tagger) | "decoder" (LM) | "seq2seq"
  int64_t vocab_size = 16;       // V
  int64_t max_len = 64;          // longest sequence a forward accepts (positions)
  int64_t d_model = 64;          // d
  int64_t n_heads = 4;           // h
  int64_t n_layers = 2;          // L (per stack; seq2seq has L encoder and L decoder blocks)
  int64_t d_ff = 256;
  int64_t d_k = 0;  // per-head query/key width; 0 -> d / h
  int64_t d_v = 0;  // per-head value width;     0 -> d / h
  std::string positional = "sinusoidal";  // "sinusoidal" | "learned" | "rope" | "none"
  std::string norm = "pre";               // "pre" | "post"
  std::string attn_scale = "sqrt";        // "sqrt" | "none" | "linear" | a number
  std::string activation = "relu";        // "relu" | "gelu"
  double dropout = 0;       // on the embedding sum, each sublayer output and inside FF (Vaswani)
  double attn_dropout = 0;  // on the attention weights (off in Vaswani's base model)
  bool tie_embeddings = false;            // head.weight = tok_emb.weight (head keeps its bias)
  // No q/k/v/out projections: one head over the whole width (n_heads, d_k
  // and d_v then do not apply; see MultiHeadAttentionOptions::projections).
  bool parameter_free_attention = false;
  // Initial weights: "auto" (gpt2 with learned positions, torch otherwise) |
  // "torch" (each layer's PyTorch default) | "gpt2" (N(0, 0.02), residual output
  // projections scaled down); models/init.h says it per parameter and why auto.
  std::string init = "auto";
  // Randomised positions (Ruoss et al. 2023; models/positions.h): 0 = off; P > 0:
  // in training each sequence reads a sorted random subset of the positions
  // [0, P), in evaluation an even spread over [0, P). P must equal max_len
  // (the table the subsets are drawn from); sinusoidal or learned positions only.
  int64_t random_positions = 0;

  // Head widths after applying the defaults.
  int64_t head_dim_k() const { return d_k > 0 ? d_k : d_model / n_heads; }
  int64_t head_dim_v() const { return d_v > 0 ? d_v : d_model / n_heads; }

  // Throws ValueError naming the first offending field and its value.
  void validate() const;

  nlohmann::json to_json() const;
  // Missing keys keep their defaults; an unknown key or a value of the wrong
  // type throws ValueError (a typo in a config file must not pass silently).
  // The result is validated.
  static TransformerConfig from_json(const nlohmann::json& j);
};

}  // namespace attnlab
