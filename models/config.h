#pragma once
// TransformerConfig: every architectural choice of the three model shapes, in
// one plain struct that round-trips through JSON (run directories, checkpoints,
// the PyTorch parity fixtures).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "framework/error.h"

namespace attnlab {

// The choices among names: parsed from text where a flag, config.ini or JSON
// gives them (the boundary), compared as enums everywhere inside.
enum class Arch { encoder, decoder, seq2seq };  // tagger | LM | encoder-decoder
enum class Positional { sinusoidal, learned, rope, none };
enum class Norm { pre, post };
enum class InitScheme { automatic, torch, gpt2 };  // automatic is written "auto"
// How a decoder lays out a (prompt, answer) pair: special = [bos] prompt [sep]
// answer [eos]; bare = prompt answer, no special tokens (minGPT's adder and sort).
enum class Layout { special, bare };

// Each enum's values and their text, in declaration order.
template <class E>
using ChoiceNames = std::vector<std::pair<E, std::string>>;
const ChoiceNames<Arch>& choice_names(Arch);
const ChoiceNames<Positional>& choice_names(Positional);
const ChoiceNames<Norm>& choice_names(Norm);
const ChoiceNames<InitScheme>& choice_names(InitScheme);
const ChoiceNames<Layout>& choice_names(Layout);

// The text of a choice ("seq2seq"), and the choice a text names (none when unknown).
template <class E>
std::string name_of(E value) {
  for (const auto& [v, name] : choice_names(E{}))
    if (v == value) return name;
  return "?";
}
template <class E>
std::optional<E> choice_named(const std::string& text) {
  for (const auto& [v, name] : choice_names(E{}))
    if (name == text) return v;
  return std::nullopt;
}
// The names sorted, each wrapped in `quote`: "'a', 'b', 'c'" (the messages list them so).
template <class E>
std::string sorted_names(const std::string& quote) {
  std::vector<std::string> names;
  for (const auto& entry : choice_names(E{})) names.push_back(entry.second);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + quote + name + quote;
  return out;
}

// choice_named, or ValueError "FIELD must be one of 'a', 'b', got 'x'".
template <class E>
E parse_choice(const std::string& field, const std::string& text) {
  if (auto v = choice_named<E>(text)) return *v;
  throw ValueError(field + " must be one of " + sorted_names<E>("'") + ", got '" + text + "'");
}

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
  InitScheme init = InitScheme::automatic;
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
