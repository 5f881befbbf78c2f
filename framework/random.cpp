#include "framework/random.h"

#include <cmath>
#include <sstream>

#include "framework/error.h"

namespace attnlab {

double Rng::normal(double mean, double stddev) {
  // Box-Muller on our own uniforms, so the stream does not depend on the
  // standard library's normal_distribution.
  double u1 = uniform();
  double u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t Rng::integer(int64_t lo, int64_t hi) {
  if (hi < lo) throw ValueError("Rng::integer: empty range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  // Rejection sampling: unbiased and independent of the library's distributions.
  uint64_t limit = span ? (UINT64_MAX / span) * span : 0;
  uint64_t x;
  do x = engine_(); while (span && x >= limit);
  return lo + static_cast<int64_t>(span ? x % span : x);
}

std::string Rng::state() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

void Rng::set_state(const std::string& s) {
  std::istringstream in(s);
  std::mt19937_64 e;
  in >> e;
  if (in.fail()) throw ValueError("malformed random-generator state");
  engine_ = e;
}

}  // namespace attnlab
