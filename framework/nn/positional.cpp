#include "framework/nn/positional.h"

#include <cmath>
#include <cstring>
#include <string>

#include "framework/ops/embedding.h"

namespace attnlab {

namespace {

void check_sizes(const char* what, int64_t max_len, int64_t d) {
  if (max_len <= 0 || d <= 0)
    throw ValueError(std::string(what) + ": sizes must be positive, got max_len = " + std::to_string(max_len) +
                     ", d = " + std::to_string(d));
}

void check_range(const char* what, int64_t t_len, int64_t offset, int64_t max_len) {
  if (t_len < 0 || offset < 0 || offset + t_len > max_len)
    throw ValueError(std::string(what) + ": positions [" + std::to_string(offset) + ", " +
                     std::to_string(offset + t_len) + ") do not fit max_len = " + std::to_string(max_len));
}

}  // namespace

Tensor sinusoidal_table(int64_t max_len, int64_t d) {
  check_sizes("sinusoidal_table", max_len, d);
  Tensor pe({max_len, d});
  for (int64_t c = 0; c < d; ++c) {
    const int64_t two_i = c - c % 2;  // the even channel of the pair
    const double inv_freq = std::pow(10000.0, -static_cast<double>(two_i) / static_cast<double>(d));
    for (int64_t p = 0; p < max_len; ++p) {
      const double angle = static_cast<double>(p) * inv_freq;
      pe[p * d + c] = static_cast<Real>(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return pe;
}

SinusoidalPositional::SinusoidalPositional(int64_t max_len, int64_t d) : table_(sinusoidal_table(max_len, d)) {}

Var SinusoidalPositional::forward(int64_t t_len, int64_t offset) const {
  const int64_t max_len = table_.size(0), d = table_.size(1);
  check_range("SinusoidalPositional", t_len, offset, max_len);
  Tensor rows({t_len, d});
  if (t_len > 0) std::memcpy(rows.data(), table_.data() + offset * d, sizeof(Real) * static_cast<size_t>(t_len * d));
  return Var(std::move(rows));
}

LearnedPositional::LearnedPositional(int64_t max_len, int64_t d, Rng& init) : max_len_(max_len), d_(d) {
  check_sizes("LearnedPositional", max_len, d);
  Tensor w({max_len, d});
  for (int64_t i = 0; i < w.numel(); ++i) w[i] = static_cast<Real>(init.normal(0.0, 0.02));
  weight = register_parameter("weight", std::move(w));
}

Var LearnedPositional::forward(int64_t t_len, int64_t offset) const {
  check_range("LearnedPositional", t_len, offset, max_len_);
  // A lookup of consecutive ids: the embedding op scatters the gradient back
  // into exactly these rows.
  IntTensor ids({t_len});
  for (int64_t t = 0; t < t_len; ++t) ids.data[static_cast<size_t>(t)] = static_cast<int32_t>(offset + t);
  return embedding(weight, ids);
}

}  // namespace attnlab
