#include "interventions/components.h"

#include <algorithm>

#include "framework/error.h"

namespace attnlab {

namespace {

// The stacks of an architecture, each with its blocks' attentions, in forward order.
struct Stack {
  std::string prefix;
  std::vector<std::string> attentions;
};

std::vector<Stack> stacks_of(const TransformerConfig& c) {
  if (c.arch == Arch::seq2seq) return {{"encoder.", {"attn"}}, {"decoder.", {"self_attn", "cross_attn"}}};
  return {{"", {"attn"}}};
}

std::string what_model_has(const TransformerConfig& c) {
  std::string out = "this model has ";
  const std::vector<Stack> stacks = stacks_of(c);
  for (size_t s = 0; s < stacks.size(); ++s) {
    if (s) out += "; ";
    out += stacks[s].prefix + "blocks.0-" + std::to_string(c.n_layers - 1) + ", heads h0-h" +
           std::to_string(heads_per_attention(c) - 1) + " in ";
    for (size_t a = 0; a < stacks[s].attentions.size(); ++a) out += (a ? " and " : "") + stacks[s].attentions[a];
    if (!c.attention_only) out += ", mlp";
  }
  return out;
}

}  // namespace

std::string Component::block_prefix() const { return stack + "blocks." + std::to_string(block) + "."; }

std::string Component::name() const {
  const std::string prefix = block_prefix();
  switch (kind) {
    case ComponentKind::head: return prefix + attention + ".h" + std::to_string(head);
    case ComponentKind::mlp: return prefix + "mlp";
    case ComponentKind::layer: break;
  }
  return prefix.substr(0, prefix.size() - 1);
}

std::vector<std::string> Component::points(const TransformerConfig& c) const {
  const std::string prefix = block_prefix();
  switch (kind) {
    case ComponentKind::head: return {prefix + attention + ".z"};
    case ComponentKind::mlp: return {prefix + "mlp.out"};
    case ComponentKind::layer: break;
  }
  std::vector<std::string> points;
  for (const Stack& s : stacks_of(c))
    if (s.prefix == stack)
      for (const std::string& a : s.attentions) points.push_back(prefix + a + ".out");
  if (!c.attention_only) points.push_back(prefix + "mlp.out");
  return points;
}

int64_t heads_per_attention(const TransformerConfig& c) { return c.parameter_free_attention ? 1 : c.n_heads; }

HeadColumns head_columns(const TransformerConfig& c, int64_t head) {
  if (head < 0 || head >= heads_per_attention(c))
    throw ValueError("head " + std::to_string(head) + " does not exist (heads 0-" +
                     std::to_string(heads_per_attention(c) - 1) + ")");
  const int64_t width = c.parameter_free_attention ? c.d_model : c.head_dim_v();
  return {head * width, width};
}

std::vector<Component> model_components(const TransformerConfig& c) {
  std::vector<Component> out;
  for (const Stack& s : stacks_of(c))
    for (int64_t b = 0; b < c.n_layers; ++b) {
      for (const std::string& a : s.attentions)
        for (int64_t hh = 0; hh < heads_per_attention(c); ++hh) out.push_back({ComponentKind::head, s.prefix, b, a, hh});
      if (!c.attention_only) out.push_back({ComponentKind::mlp, s.prefix, b, "", -1});
      out.push_back({ComponentKind::layer, s.prefix, b, "", -1});
    }
  return out;
}

std::vector<Component> components_named(const TransformerConfig& c, const std::vector<std::string>& names) {
  const std::vector<Component> all = model_components(c);
  std::vector<Component> out;
  for (const std::string& name : names) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const Component& k) { return k.name() == name; });
    if (it == all.end()) throw ValueError("no component named '" + name + "' (" + what_model_has(c) + ")");
    out.push_back(*it);
  }
  return out;
}

}  // namespace attnlab
