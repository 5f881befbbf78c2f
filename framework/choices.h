#pragma once
// Choices among names (--optimizer adamw, "arch": "seq2seq"): each enum's
// values and their text declared once, in one table per enum (choice_names),
// parsed from text at the boundary (a flag, config.ini, JSON) and compared as
// enums everywhere inside. The flags' --help lists the values from the same
// table (help_with_choices), and the messages of a bad name list them too.
//
// An enum E takes part by declaring, beside itself (found by argument-dependent
// lookup):  const ChoiceNames<E>& choice_names(E);
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "framework/error.h"

namespace attnlab {

// One value of a choice: its text and, for --help, what it means ("" when the
// name says it all).
template <class E>
struct Choice {
  E value;
  std::string name;
  std::string help = "";
};
// Each enum's values, in declaration order (the order --help lists them in).
template <class E>
using ChoiceNames = std::vector<Choice<E>>;

// Messages name an option by its JSON key ("d_k", values quoted: 'rope') or by
// its flag ("--d-k", values as typed: rope).
enum class Naming { json, flag };

// The text of a choice ("seq2seq"), and the choice a text names (none when unknown).
template <class E>
std::string name_of(E value) {
  for (const auto& c : choice_names(E{}))
    if (c.value == value) return c.name;
  return "?";
}
template <class E>
std::optional<E> choice_named(const std::string& text) {
  for (const auto& c : choice_names(E{}))
    if (c.name == text) return c.value;
  return std::nullopt;
}

// The names sorted, each wrapped in `quote`: "'a', 'b', 'c'" (the messages list them so).
template <class E>
std::string sorted_names(const std::string& quote) {
  std::vector<std::string> names;
  for (const auto& c : choice_names(E{})) names.push_back(c.name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + quote + name + quote;
  return out;
}

// choice_named, or ValueError "OPTION must be one of 'a', 'b', got 'x'" (json)
// or "OPTION must be one of a, b, got 'x'" (flag); `option` as the user wrote it.
template <class E>
E parse_choice(const std::string& option, const std::string& text, Naming naming = Naming::json) {
  if (auto v = choice_named<E>(text)) return *v;
  throw ValueError(option + " must be one of " + sorted_names<E>(naming == Naming::json ? "'" : "") + ", got '" +
                   text + "'");
}

// The values for --help, in declaration order: "pre (pre-LN) | post".
template <class E>
std::string choices_help() {
  std::string out;
  for (const auto& c : choice_names(E{}))
    out += (out.empty() ? "" : " | ") + c.name + (c.help.empty() ? "" : " (" + c.help + ")");
  return out;
}
// An option's help with its values: "{}" in `help` replaced by choices_help
// ("activation: {}" -> "activation: relu | gelu"); a help without "{}" (an
// option that takes some of the values only) is returned as it is.
template <class E>
std::string help_with_choices(const std::string& help) {
  const size_t at = help.find("{}");
  if (at == std::string::npos) return help;
  return help.substr(0, at) + choices_help<E>() + help.substr(at + 2);
}

}  // namespace attnlab
