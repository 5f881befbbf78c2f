#include "framework/error.h"

#include <sstream>

namespace attnlab {

std::string exact_text(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

}  // namespace attnlab
