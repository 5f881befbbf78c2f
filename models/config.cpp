#include "models/config.h"

#include <cmath>
#include <set>
#include <sstream>

#include "framework/error.h"
#include "framework/nn/multi_head_attention.h"
#include "models/init.h"

namespace attnlab {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

void require_positive(const char* field, int64_t value) {
  if (value <= 0)
    throw ValueError(std::string(field) + " must be positive, got " + std::to_string(value));
}

void require_one_of(const char* field, const std::string& value, const std::set<std::string>& allowed) {
  if (allowed.count(value)) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + quoted(a);
  throw ValueError(std::string(field) + " must be one of " + list + ", got " + quoted(value));
}

void check_random_positions(const TransformerConfig& c) {
  if (c.random_positions == 0) return;
  if (c.random_positions < 0)
    throw ValueError("random_positions must be 0 (off) or a positive range P, got " + std::to_string(c.random_positions));
  if (c.random_positions != c.max_len)
    throw ValueError("random_positions (" + std::to_string(c.random_positions) +
                     ") must equal max_len, the positional table it draws from, got max_len = " + std::to_string(c.max_len));
  if (c.positional != "sinusoidal" && c.positional != "learned")
    throw ValueError("random_positions applies to sinusoidal or learned positions, not positional " + quoted(c.positional) +
                     (c.positional == "rope" ? " (rotary positions are relative)" : " (there are no positions)"));
}

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

void TransformerConfig::validate() const {
  require_one_of("arch", arch, {"encoder", "decoder", "seq2seq"});
  require_positive("vocab_size", vocab_size);
  if (max_len < 1) throw ValueError("max_len must be at least 1, got " + std::to_string(max_len));
  require_positive("d_model", d_model);
  require_positive("n_heads", n_heads);
  require_positive("n_layers", n_layers);
  require_positive("d_ff", d_ff);
  if (d_k < 0) throw ValueError("d_k must be positive (or 0 for d_model / n_heads), got " + std::to_string(d_k));
  if (d_v < 0) throw ValueError("d_v must be positive (or 0 for d_model / n_heads), got " + std::to_string(d_v));
  if ((d_k == 0 || d_v == 0) && d_model % n_heads != 0)
    throw ValueError("n_heads (" + std::to_string(n_heads) + ") must divide d_model (" + std::to_string(d_model) +
                     "), or set d_k and d_v");
  require_one_of("positional", positional, {"sinusoidal", "learned", "rope", "none"});
  require_one_of("norm", norm, {"pre", "post"});
  require_one_of("activation", activation, {"relu", "gelu"});
  try {
    parse_attention_scale(attn_scale);
  } catch (const ValueError&) {
    throw ValueError("attn_scale must be 'sqrt', 'none', 'linear' or a positive number, got " + quoted(attn_scale));
  }
  if (!(dropout >= 0 && dropout < 1)) throw ValueError("dropout must be in [0, 1), got " + num(dropout));
  if (!(attn_dropout >= 0 && attn_dropout < 1))
    throw ValueError("attn_dropout must be in [0, 1), got " + num(attn_dropout));
  if (!is_init_scheme(init)) throw ValueError("init must be one of 'auto', 'gpt2', 'torch', got " + quoted(init));
  check_random_positions(*this);
  // Parameter-free attention is one head over the whole width (see MultiHeadAttentionOptions).
  const int64_t rotated = parameter_free_attention ? d_model : head_dim_k();
  if (positional == "rope" && rotated % 2 != 0)
    throw ValueError("positional 'rope' rotates pairs of channels and needs an even d_k, got d_k = " +
                     std::to_string(rotated));
}

nlohmann::json TransformerConfig::to_json() const {
  return nlohmann::json{{"arch", arch},
                        {"vocab_size", vocab_size},
                        {"max_len", max_len},
                        {"d_model", d_model},
                        {"n_heads", n_heads},
                        {"n_layers", n_layers},
                        {"d_ff", d_ff},
                        {"d_k", d_k},
                        {"d_v", d_v},
                        {"positional", positional},
                        {"norm", norm},
                        {"attn_scale", attn_scale},
                        {"activation", activation},
                        {"dropout", dropout},
                        {"attn_dropout", attn_dropout},
                        {"tie_embeddings", tie_embeddings},
                        {"parameter_free_attention", parameter_free_attention},
                        {"init", init},
                        {"random_positions", random_positions}};
}

TransformerConfig TransformerConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ValueError("a model config must be a JSON object, got " + j.dump());
  TransformerConfig c;
  const nlohmann::json known = c.to_json();  // every field to_json writes, and only those
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.contains(it.key())) throw ValueError("unknown model config field '" + it.key() + "'");
  auto str = [&](const char* key, std::string& out) {
    if (!j.contains(key)) return;
    // attn_scale may also be written as a bare number.
    if (j.at(key).is_number() && std::string(key) == "attn_scale") {
      out = j.at(key).dump();  // shortest text that reads back as the same number
      return;
    }
    if (!j.at(key).is_string())
      throw ValueError("config field '" + std::string(key) + "' must be a string, got " + j.at(key).dump());
    out = j.at(key).get<std::string>();
  };
  auto integer = [&](const char* key, int64_t& out) {
    if (!j.contains(key)) return;
    const auto& v = j.at(key);
    if (!v.is_number_integer())
      throw ValueError("config field '" + std::string(key) + "' must be an integer, got " + v.dump());
    out = v.get<int64_t>();
  };
  auto real = [&](const char* key, double& out) {
    if (!j.contains(key)) return;
    if (!j.at(key).is_number())
      throw ValueError("config field '" + std::string(key) + "' must be a number, got " + j.at(key).dump());
    out = j.at(key).get<double>();
  };
  auto boolean = [&](const char* key, bool& out) {
    if (!j.contains(key)) return;
    if (!j.at(key).is_boolean())
      throw ValueError("config field '" + std::string(key) + "' must be true or false, got " + j.at(key).dump());
    out = j.at(key).get<bool>();
  };
  str("arch", c.arch);
  integer("vocab_size", c.vocab_size);
  integer("max_len", c.max_len);
  integer("d_model", c.d_model);
  integer("n_heads", c.n_heads);
  integer("n_layers", c.n_layers);
  integer("d_ff", c.d_ff);
  integer("d_k", c.d_k);
  integer("d_v", c.d_v);
  integer("random_positions", c.random_positions);
  str("positional", c.positional);
  str("norm", c.norm);
  str("attn_scale", c.attn_scale);
  str("activation", c.activation);
  real("dropout", c.dropout);
  real("attn_dropout", c.attn_dropout);
  boolean("tie_embeddings", c.tie_embeddings);
  boolean("parameter_free_attention", c.parameter_free_attention);
  c.init = "torch";  // a config written before --init existed was initialised so
  str("init", c.init);
  c.validate();
  return c;
}

}  // namespace attnlab
