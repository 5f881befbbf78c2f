#pragma once
// TransformerConfig: every architectural choice of the three model shapes, in
// one plain struct that round-trips through JSON (run directories, checkpoints,
// the PyTorch parity fixtures).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "framework/choices.h"
#include "framework/nn/activation.h"

namespace attnlab {

// The model's choices among names (framework/choices.h).
enum class Arch { encoder, decoder, seq2seq };  // tagger | LM | encoder-decoder
enum class Positional { sinusoidal, learned, rope, none };
enum class Norm { pre, post, none };  // none: no LayerNorm anywhere (Nanda et al.'s grokking model)
enum class InitScheme { automatic, torch, gpt2 };  // automatic is written "auto"
// How a decoder lays out a (prompt, answer) pair: special = [bos] prompt [sep]
// answer [eos]; bare = prompt answer, no special tokens (minGPT's adder and sort).
enum class Layout { special, bare };

// Each enum's values and their text (framework/choices.h).
const ChoiceNames<Arch>& choice_names(Arch);
const ChoiceNames<Positional>& choice_names(Positional);
const ChoiceNames<Norm>& choice_names(Norm);
const ChoiceNames<InitScheme>& choice_names(InitScheme);
const ChoiceNames<Layout>& choice_names(Layout);

// A new field is declared here and given one row in models/model_options.cpp
// (JSON key, flag, bound, help); JSON, the flags of train, config.ini and the
// checks read that row.
struct TransformerConfig {
  Arch arch = Arch::encoder;
  int64_t vocab_size = 16;       // V
  int64_t max_len = 64;          // longest sequence a forward accepts (positions)
  int64_t d_model = 64;          // d
  int64_t n_heads = 4;           // h
  int64_t n_layers = 2;          // L (per stack; seq2seq has L encoder and L decoder blocks)
  int64_t d_ff = 256;
  int64_t d_k = 0;  // per-head query/key width; 0 -> d / h
  int64_t d_v = 0;  // per-head value width;     0 -> d / h
  Positional positional = Positional::sinusoidal;
  Norm norm = Norm::pre;
  std::string attn_scale = "sqrt";        // "sqrt" | "none" | "linear" | a number
  Activation activation = Activation::relu;
  double dropout = 0;       // on the embedding sum, each sublayer output and inside FF (Vaswani)
  double attn_dropout = 0;  // on the attention weights (off in Vaswani's base model)
  bool tie_embeddings = false;            // head.weight = tok_emb.weight (head keeps its own bias)
  // Blocks of attention sublayers only: no feed-forward and no norm in front
  // of it (Olsson et al.'s induction-head models); d_ff and activation then do
  // not apply, and a block's mlp.* hook points do not exist.
  bool attention_only = false;
  // No bias in any Linear (attention's q/k/v/out projections, the feed-forward)
  // nor in the output head; LayerNorm keeps its beta (Nanda et al.'s model).
  bool no_bias = false;
  // No q/k/v/out projections: one head over the whole width (n_heads, d_k
  // and d_v then do not apply; see MultiHeadAttentionOptions::projections).
  bool parameter_free_attention = false;
  // Initial weights: "auto" (gpt2 with learned positions, torch otherwise) |
  // "torch" (each layer's PyTorch default) | "gpt2" (N(0, 0.02), residual output
  // projections scaled down); models/init.h says it per parameter and why auto.
  InitScheme init = InitScheme::automatic;
  // The gpt2 scheme's standard deviation s: weights and embeddings N(0, s²),
  // residual output projections N(0, s²/N). 0.02 is GPT-2's; about 1/√d is
  // Nanda et al.'s grokking model (1/√128 ≈ 0.088). Applies to gpt2 only.
  double init_std = 0.02;
  // Randomised positions (Ruoss et al. 2023; models/positions.h): 0 = off; P > 0:
  // in training each sequence reads a sorted random subset of the positions
  // [0, P), in evaluation an even spread over [0, P). P must equal max_len
  // (the table the subsets are drawn from); sinusoidal or learned positions only.
  int64_t random_positions = 0;
  // The decoder's sequence layout (models/batch.h); bare: the loss covers the
  // answer only and greedy decoding emits exactly the answer's length, which
  // the task gives (there is no [eos] to stop at). Decoder only.
  Layout layout = Layout::special;

  // Head widths after applying the defaults.
  int64_t head_dim_k() const { return d_k > 0 ? d_k : d_model / n_heads; }
  int64_t head_dim_v() const { return d_v > 0 ? d_v : d_model / n_heads; }

  // Throws ValueError naming the first offending field and its value.
  void validate() const;

  // The fields of models/model_options.h, under their JSON keys.
  nlohmann::json to_json() const;
  // Missing keys keep their defaults; an unknown key or a value of the wrong
  // type throws ValueError (a typo in a config file must not pass silently).
  // The result is validated.
  static TransformerConfig from_json(const nlohmann::json& j);
};

}  // namespace attnlab
