#include "framework/error.h"

#include <sstream>

namespace attnlab {

std::string exact_text(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

std::string shortened(const std::string& value, size_t keep) {
  if (value.size() <= keep) return value;
  size_t cut = keep;
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
  return value.substr(0, cut) + "... (" + std::to_string(value.size()) + " bytes)";
}

}  // namespace attnlab
