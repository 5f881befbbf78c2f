#include "framework/io/shell_quote.h"

#include <cctype>
#include <cstring>

namespace attnlab {

std::string shell_quote(const std::string& word) {
  bool plain = !word.empty();
  for (unsigned char c : word) plain = plain && (std::isalnum(c) || std::strchr("_./:=+-,@%", c));
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace attnlab
