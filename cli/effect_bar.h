#pragma once
// The effect bar of attnlab ablate's table (cli/ablate_output.cpp): `width`
// '#' for the largest effect, the others in proportion (rounded), at least
// one for any effect above 0, none for no effect or a negative one. Header
// only, so that the unit tests check the rule without the CLI library.
#include <algorithm>
#include <cmath>

namespace attnlab::cli {

inline int effect_bar(double effect, double largest, int width) {
  if (!(largest > 0) || !(effect > 0)) return 0;
  return std::max(1, static_cast<int>(std::lround(width * effect / largest)));
}

}  // namespace attnlab::cli
