#include "models/config.h"

#include <cmath>
#include <sstream>

#include "framework/error.h"
#include "framework/nn/multi_head_attention.h"
#include "models/init.h"
#include "models/model_options.h"

namespace attnlab {

const ChoiceNames<Arch>& choice_names(Arch) {
  static const ChoiceNames<Arch> names = {{Arch::encoder, "encoder"}, {Arch::decoder, "decoder"}, {Arch::seq2seq, "seq2seq"}};
  return names;
}
const ChoiceNames<Positional>& choice_names(Positional) {
  static const ChoiceNames<Positional> names = {{Positional::sinusoidal, "sinusoidal"},
                                                {Positional::learned, "learned"},
                                                {Positional::rope, "rope"},
                                                {Positional::none, "none"}};
  return names;
}
const ChoiceNames<Norm>& choice_names(Norm) {
  static const ChoiceNames<Norm> names = {{Norm::pre, "pre"}, {Norm::post, "post"}};
  return names;
}
const ChoiceNames<InitScheme>& choice_names(InitScheme) {
  static const ChoiceNames<InitScheme> names = {
      {InitScheme::automatic, "auto"}, {InitScheme::torch, "torch"}, {InitScheme::gpt2, "gpt2"}};
  return names;
}

const ChoiceNames<Layout>& choice_names(Layout) {
  static const ChoiceNames<Layout> names = {{Layout::special, "special"}, {Layout::bare, "bare"}};
  return names;
}

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

void require_one_of(const char* field, const std::string& value, const std::vector<std::string>& allowed) {
  for (const auto& a : allowed)
    if (a == value) return;
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
  if (c.positional != Positional::sinusoidal && c.positional != Positional::learned)
    throw ValueError("random_positions applies to sinusoidal or learned positions, not positional " +
                     quoted(name_of(c.positional)) +
                     (c.positional == Positional::rope ? " (rotary positions are relative)" : " (there are no positions)"));
}

// One field's JSON value, checked for its type; an enum's text parsed.
struct ReadField {
  const nlohmann::json& v;
  const std::string& key;
  [[noreturn]] void refuse(const char* type) const {
    throw ValueError("config field '" + key + "' must be " + type + ", got " + v.dump());
  }
  void operator()(int64_t& out) const {
    if (!v.is_number_integer()) refuse("an integer");
    out = v.get<int64_t>();
  }
  void operator()(double& out) const {
    if (!v.is_number()) refuse("a number");
    out = v.get<double>();
  }
  void operator()(bool& out) const {
    if (!v.is_boolean()) refuse("true or false");
    out = v.get<bool>();
  }
  void operator()(std::string& out) const {
    if (v.is_number() && key == "attn_scale") {  // attn_scale may also be written as a bare number
      out = v.dump();  // shortest text that reads back as the same number
      return;
    }
    if (!v.is_string()) refuse("a string");
    out = v.get<std::string>();
  }
  template <class E>
  void operator()(E& out) const {
    std::string name;
    (*this)(name);
    out = parse_choice<E>(key, name);
  }
};

}  // namespace

void TransformerConfig::validate() const {
  if (max_len < 1) throw ValueError("max_len must be at least 1, got " + std::to_string(max_len));
  check_bounds(*this, Naming::json, false);
  if ((d_k == 0 || d_v == 0) && d_model % n_heads != 0)
    throw ValueError("n_heads (" + std::to_string(n_heads) + ") must divide d_model (" + std::to_string(d_model) +
                     "), or set d_k and d_v");
  require_one_of("activation", activation, {"gelu", "relu"});
  try {
    parse_attention_scale(attn_scale);
  } catch (const ValueError&) {
    throw ValueError("attn_scale must be 'sqrt', 'none', 'linear' or a positive number, got " + quoted(attn_scale));
  }
  check_bounds(*this, Naming::json, true);
  check_random_positions(*this);
  if (layout == Layout::bare && arch != Arch::decoder)
    throw ValueError("layout 'bare' applies to arch 'decoder' (a prompt then its answer in one sequence), got arch " +
                     quoted(name_of(arch)));
  check_rope_width(*this, Naming::json);
}

nlohmann::json TransformerConfig::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const ModelOption& o : model_options())
    std::visit(
        [&](auto field) {
          const auto& value = this->*field;
          if constexpr (std::is_enum_v<std::decay_t<decltype(value)>>) j[o.key] = name_of(value);
          else j[o.key] = value;
        },
        o.field);
  return j;
}

TransformerConfig TransformerConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ValueError("a model config must be a JSON object, got " + j.dump());
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!model_option(it.key())) throw ValueError("unknown model config field '" + it.key() + "'");
  TransformerConfig c;
  c.init = InitScheme::torch;  // a config written before --init existed was initialised so
  for (const ModelOption& o : model_options()) {
    const std::string key = o.key;
    if (j.contains(key)) std::visit([&](auto field) { ReadField{j.at(key), key}(c.*field); }, o.field);
  }
  c.validate();
  return c;
}

}  // namespace attnlab
