#pragma once
// One seeded generator per purpose (init, data, dropout); never a global.
#include <cstdint>
#include <random>
#include <string>

#include "framework/real.h"

namespace attnlab {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : engine_(seed) {}
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(engine_); }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal(double mean = 0.0, double stddev = 1.0);  // Box-Muller: portable across libraries
  int64_t integer(int64_t lo, int64_t hi);                 // uniform in [lo, hi]
  uint64_t next_u64() { return engine_(); }
  std::mt19937_64& engine() { return engine_; }

  std::string state() const;             // serialised state, for checkpoints
  void set_state(const std::string& s);  // throws ValueError on a malformed state

 private:
  std::mt19937_64 engine_;
};

}  // namespace attnlab
