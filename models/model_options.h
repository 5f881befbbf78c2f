#pragma once
// Every field of TransformerConfig declared once (PyTorch's TORCH_ARG,
// nanoGPT's config dataclass, flashlight's list of serialised fields): its
// JSON key, its flag (also its config.ini key), its help and the range it
// must be in. The JSON of run directories and checkpoints, the flags of
// `attnlab train` (training/settings_options.h), the checks of both and the
// names a mismatch at load reports all read this table.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "models/config.h"

namespace attnlab {

// A pointer to one field of C, whatever its type.
template <class C>
using FieldOf = std::variant<int64_t C::*, double C::*, bool C::*, std::string C::*, Arch C::*, Positional C::*,
                             Norm C::*, InitScheme C::*, Layout C::*, Activation C::*>;

// The range a number must be in; each has one message per naming (below).
enum class Bound {
  none,
  positive,
  positive_or_auto,  // 0 = d_model / n_heads (d_k, d_v)
  fraction,          // [0, 1), a probability
};

struct ModelOption {
  const char* key;   // the JSON key (model_config)
  const char* flag;  // the long flag and config.ini key; "" when derived from other options
  FieldOf<TransformerConfig> field;
  Bound bound;
  // The --help text; for a derived field, what it is as config.ini names it.
  // A choice's values come from its table: "{}" marks where they go
  // (framework/choices.h's help_with_choices).
  const char* help;
};

// Every field, in the order of --help and config.ini (the derived ones first).
const std::vector<ModelOption>& model_options();

// The option with JSON key `key`; nullptr for none.
const ModelOption* model_option(const std::string& key);

// An option as messages name it: its JSON key ("d_k") or its flag ("--d-k")
// (Naming: framework/choices.h).
std::string option_name(const ModelOption& o, Naming naming);

// ValueError naming the first field out of its Bound, in table order: the
// integers, or (`reals`) the real numbers. Fields without a flag are skipped
// under Naming::flag.
void check_bounds(const TransformerConfig& c, Naming naming, bool reals);

// ValueError when rope is asked for with an odd query/key width per head
// (rotary embedding turns pairs of channels): the one statement of the rule
// for a model's options, named either way.
void check_rope_width(const TransformerConfig& c, Naming naming);

}  // namespace attnlab
