#include "models/model_rules.h"

#include "framework/error.h"
#include "framework/nn/multi_head_attention.h"
#include "models/init.h"
#include "models/model_options.h"

namespace attnlab {

namespace {

// An option as `naming` names it ("n_heads", "--heads"), by its JSON key.
std::string named(const char* key, Naming naming) { return option_name(*model_option(key), naming); }

// A choice's text as a message shows it: 'rope' among JSON names, rope among flags.
std::string shown(const std::string& text, Naming naming) {
  return naming == Naming::json ? "'" + text + "'" : text;
}

void check_heads_divide(const TransformerConfig& c, Naming n) {
  if ((c.d_k != 0 && c.d_v != 0) || c.d_model % c.n_heads == 0) return;
  throw ValueError(named("n_heads", n) + " " + std::to_string(c.n_heads) + " does not divide " + named("d_model", n) +
                   " " + std::to_string(c.d_model) + "; choose a divisor, or set " + named("d_k", n) + " and " +
                   named("d_v", n));
}

void check_parameter_free_widths(const TransformerConfig& c, Naming n) {
  if (!c.parameter_free_attention || (c.d_k == 0 && c.d_v == 0)) return;
  throw ValueError(named("d_k", n) + " and " + named("d_v", n) + " do not apply to " +
                   named("parameter_free_attention", n) + " (one head over the whole width)");
}

void check_attn_scale(const TransformerConfig& c, Naming n) {
  try {
    parse_attention_scale(c.attn_scale);
  } catch (const ValueError&) {
    throw ValueError(named("attn_scale", n) + " must be " + shown("sqrt", n) + ", " + shown("none", n) + ", " +
                     shown("linear", n) + " or a positive number, got '" + c.attn_scale + "'");
  }
}

// init_std is the gpt2 scheme's; the torch scheme draws each layer's PyTorch default.
void check_init_std(const TransformerConfig& c, Naming n) {
  if (c.init_std == TransformerConfig().init_std || resolved_init(c) == InitScheme::gpt2) return;
  throw ValueError(named("init_std", n) + " applies to " + named("init", n) + " " + shown("gpt2", n) +
                   ", and this model's is " + shown(name_of(resolved_init(c)), n) + " (" + named("init", n) + " " +
                   shown(name_of(c.init), n) + ")");
}

}  // namespace

void check_random_positions_kind(const TransformerConfig& c, Naming n) {
  const std::string name = named("random_positions", n);
  if (c.random_positions < 0)
    throw ValueError(name + " must be 0 (off) or a positive range P, got " + std::to_string(c.random_positions));
  if (c.random_positions == 0 || c.positional == Positional::sinusoidal || c.positional == Positional::learned) return;
  throw ValueError(name + " applies to " + named("positional", n) + " " + shown("sinusoidal", n) + " or " +
                   shown("learned", n) + ", not " + shown(name_of(c.positional), n));
}

void check_layout_arch(const TransformerConfig& c, Naming n) {
  if (c.layout != Layout::bare || c.arch == Arch::decoder) return;
  const std::string arch = named("arch", n);
  throw ValueError(named("layout", n) + " " + shown("bare", n) +
                   " lays out a prompt and its answer in one sequence: it applies to " + arch + " " +
                   shown("decoder", n) + ", got " + arch + " " + shown(name_of(c.arch), n));
}

void check_model_rules(const TransformerConfig& c, Naming naming) {
  check_bounds(c, naming, false);
  check_heads_divide(c, naming);
  check_parameter_free_widths(c, naming);
  check_attn_scale(c, naming);
  check_bounds(c, naming, true);
  check_random_positions_kind(c, naming);
  check_layout_arch(c, naming);
  check_rope_width(c, naming);
  check_init_std(c, naming);
}

}  // namespace attnlab
