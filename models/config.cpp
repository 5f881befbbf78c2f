#include "models/config.h"

#include "framework/error.h"
#include "models/model_options.h"
#include "models/model_rules.h"

namespace attnlab {

const ChoiceNames<Arch>& choice_names(Arch) {
  static const ChoiceNames<Arch> names = {{Arch::encoder, "encoder", "tagger, one output per input position"},
                                          {Arch::decoder, "decoder", "causal LM"},
                                          {Arch::seq2seq, "seq2seq"}};
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
  static const ChoiceNames<Norm> names = {{Norm::pre, "pre", "pre-LN"},
                                          {Norm::post, "post", "post-LN, as in Vaswani et al."},
                                          {Norm::none, "none", "no LayerNorm: each sublayer x + f(x), no final norm"}};
  return names;
}
const ChoiceNames<InitScheme>& choice_names(InitScheme) {
  static const ChoiceNames<InitScheme> names = {
      {InitScheme::automatic, "auto", "gpt2 with --positional learned, torch otherwise; config.ini records which"},
      {InitScheme::torch, "torch",
       "each layer's PyTorch default: token embeddings N(0, 1), the scale of sinusoidal positions"},
      {InitScheme::gpt2, "gpt2",
       "N(0, 0.02), residual output projections N(0, 0.02/sqrt(2 x layers)), biases 0: token embeddings at the "
       "scale of learned positions"}};
  return names;
}

const ChoiceNames<Layout>& choice_names(Layout) {
  static const ChoiceNames<Layout> names = {
      {Layout::special, "special", "[bos] input [sep] answer [eos]"},
      {Layout::bare, "bare",
       "input then answer, no special tokens, loss on the answer only, as minGPT's adder; decoding emits exactly "
       "the answer's length, which the task gives"}};
  return names;
}

namespace {

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
  check_model_rules(*this, Naming::json);
  // The flags derive max_len from random_positions (training/settings.cpp); a file must agree.
  if (random_positions > 0 && random_positions != max_len)
    throw ValueError("random_positions (" + std::to_string(random_positions) +
                     ") must equal max_len, the positional table it draws from, got max_len = " + std::to_string(max_len));
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
