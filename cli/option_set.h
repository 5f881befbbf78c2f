#pragma once
// Boost.Program_options with two additions the CLI needs: options come from
// the command line and from an INI file (the command line wins), and the
// resolved values can be written back as an INI file that repeats the run.
#include <boost/program_options.hpp>
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/error.h"
#include "training/settings_options.h"

namespace attnlab::cli {

namespace po = boost::program_options;

// Boost reads "-1" into a uint64_t option as 2^64 - 1 (lexical_cast wraps
// around), so a negative seed would silently become another seed. Such
// options are parsed through this type instead: only digits are accepted.
struct UnsignedArg {
  uint64_t value = 0;
};

// The error for a value that is not a whole number in [0, 2^64 - 1]; Boost
// fills in the option's name as written.
class NotUnsignedError : public po::error_with_option_name {
 public:
  explicit NotUnsignedError(const std::string& value)
      : po::error_with_option_name("%canonical_option% must be a whole number in [0, " +
                                   std::to_string(std::numeric_limits<uint64_t>::max()) + "], got '%value%'") {
    set_substitute("value", value);
  }
};

// Found by argument-dependent lookup from Boost's typed_value<UnsignedArg>.
inline void validate(boost::any& out, const std::vector<std::string>& tokens, UnsignedArg*, int) {
  po::validators::check_first_occurrence(out);
  const std::string& text = po::validators::get_single_string(tokens);
  const char* begin = text.data() + (!text.empty() && text[0] == '+');
  const char* end = text.data() + text.size();
  UnsignedArg arg;
  auto [stop, error] = std::from_chars(begin, end, arg.value);  // no sign: "-1" stops at once
  if (begin == end || error != std::errc() || stop != end)
    throw NotUnsignedError(text);
  out = arg;
}

// po::value for a uint64_t field that refuses negative numbers (see
// UnsignedArg); po::notify assigns the field, as with po::value(field).
inline po::typed_value<UnsignedArg>* unsigned_value(uint64_t* field) {
  return po::value<UnsignedArg>()->notifier([field](const UnsignedArg& a) { *field = a.value; });
}

class OptionSet {
 public:
  explicit OptionSet(const std::string& caption) : desc_(caption) {}

  // A value option bound to `field`, whose current value is the default.
  // Saved options are written into the resolved config; others (paths to the
  // run, --quiet, ...) describe one invocation, not the experiment.
  template <class T>
  OptionSet& add(const char* name, T* field, const char* help, bool saved = true) {
    if constexpr (std::is_enum_v<T>) {
      return add_choice(name, field, help, saved);
    } else {
      if constexpr (std::is_same_v<T, uint64_t>)
        desc_.add_options()(name, unsigned_value(field)->default_value(UnsignedArg{*field}, to_text(*field)), help);
      else
        desc_.add_options()(name, po::value<T>(field)->default_value(*field, to_text(*field)), help);
      if (saved) printers_.push_back({long_name(name), [field] { return to_text(*field); }});
      return *this;
    }
  }
  // A switch: --name turns it on; a file says name = true or name = false.
  // zero_tokens (bool_switch) so that --help shows no "arg" after it.
  OptionSet& flag(const char* name, bool* field, const char* help, bool saved = true) {
    desc_.add_options()(name, po::bool_switch(field)->default_value(*field, *field ? "true" : "false"), help);
    if (saved) printers_.push_back({long_name(name), [field] { return std::string(*field ? "true" : "false"); }});
    return *this;
  }
  // A choice among names (framework/choices.h), read as text and parsed when
  // the options are notified: an unknown name is a ValueError naming the flag
  // and the choices. "{}" in `help` becomes the values.
  template <class E>
  OptionSet& add_choice(const char* name, E* field, const char* help, bool saved = true) {
    const std::string flag = "--" + long_name(name);
    auto parse = [field, flag](const std::string& text) { *field = parse_choice<E>(flag, text, Naming::flag); };
    const std::string text = help_with_choices<E>(help);
    desc_.add_options()(name, po::value<std::string>()->default_value(name_of(*field))->notifier(parse), text.c_str());
    if (saved) printers_.push_back({long_name(name), [field] { return name_of(*field); }});
    return *this;
  }
  // An option of a table (training/settings_options.h), by its field's type.
  OptionSet& add(const char* name, const FieldRef& field, const char* help) {
    std::visit(
        [&](auto* f) {
          if constexpr (std::is_same_v<decltype(f), bool*>) flag(name, f, help);
          else add(name, f, help);
        },
        field);
    return *this;
  }
  OptionSet& add(const OptionSet& other) {
    desc_.add(other.desc_);
    printers_.insert(printers_.end(), other.printers_.begin(), other.printers_.end());
    return *this;
  }
  po::options_description& description() { return desc_; }
  const po::options_description& description() const { return desc_; }

  // "name = value" lines of every saved option, in declaration order.
  std::string to_ini() const {
    std::ostringstream out;
    for (const auto& [name, print] : printers_) out << name << " = " << print() << '\n';
    return out.str();
  }

 private:
  template <class T>
  static std::string to_text(const T& v) {
    std::ostringstream out;
    out.precision(17);
    out << v;
    return out.str();
  }
  static std::string to_text(const bool& v) { return v ? "true" : "false"; }
  // The shortest text that reads back as the same value ("0.1", not 0.10000000000000001).
  static std::string to_text(const double& v) {
    char buf[64];
    auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    return std::string(buf, end);
  }
  static std::string long_name(const char* name) {
    std::string s(name);
    return s.substr(0, s.find(','));
  }

  po::options_description desc_;
  std::vector<std::pair<std::string, std::function<std::string()>>> printers_;
};

}  // namespace attnlab::cli
