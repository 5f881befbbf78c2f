#include "models/positions.h"

#include <algorithm>
#include <string>

#include "framework/error.h"

namespace attnlab {

namespace {

void check_fits(const char* what, int64_t n, int64_t range) {
  if (n < 0 || n > range)
    throw ValueError(std::string(what) + ": a sequence of " + std::to_string(n) +
                     " tokens needs as many distinct positions, but the range [0, " + std::to_string(range) +
                     ") has only " + std::to_string(range));
}

// Writes row b of a (B, T) id tensor: `real` then its last entry repeated.
void put_row(IntTensor& ids, int64_t b, int64_t t_len, const std::vector<int32_t>& real) {
  const int32_t last = real.empty() ? 0 : real.back();
  for (int64_t t = 0; t < t_len; ++t)
    ids.data[static_cast<size_t>(b * t_len + t)] = t < static_cast<int64_t>(real.size()) ? real[static_cast<size_t>(t)] : last;
}

}  // namespace

std::vector<int64_t> row_lengths(const Tensor& pad, int64_t batch, int64_t t_len) {
  std::vector<int64_t> lengths(static_cast<size_t>(batch), t_len);
  if (pad.numel() == 0) return lengths;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t n = 0;
    for (int64_t t = 0; t < t_len; ++t) n += pad[b * t_len + t] == 0;
    lengths[static_cast<size_t>(b)] = n;
  }
  return lengths;
}

std::vector<int32_t> random_subset(int64_t n, int64_t range, Rng& rng) {
  check_fits("random positions", n, range);
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  // Position p is taken with probability (still needed) / (still available).
  for (int64_t p = 0; p < range && static_cast<int64_t>(out.size()) < n; ++p) {
    const int64_t needed = n - static_cast<int64_t>(out.size());
    if (rng.integer(0, range - p - 1) < needed) out.push_back(static_cast<int32_t>(p));
  }
  return out;
}

std::vector<int32_t> spread_positions(int64_t n, int64_t range) {
  check_fits("spread positions", n, range);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<int32_t>(i * range / n);
  return out;
}

IntTensor random_position_ids(const std::vector<int64_t>& lengths, int64_t t_len, int64_t range, Rng& rng) {
  const auto b_len = static_cast<int64_t>(lengths.size());
  IntTensor ids({b_len, t_len});
  for (int64_t b = 0; b < b_len; ++b) put_row(ids, b, t_len, random_subset(lengths[static_cast<size_t>(b)], range, rng));
  return ids;
}

IntTensor spread_position_ids(const std::vector<int64_t>& lengths, int64_t t_len, int64_t range) {
  const auto b_len = static_cast<int64_t>(lengths.size());
  IntTensor ids({b_len, t_len});
  for (int64_t b = 0; b < b_len; ++b) put_row(ids, b, t_len, spread_positions(lengths[static_cast<size_t>(b)], range));
  return ids;
}

std::vector<int32_t> decoding_positions(const TransformerConfig& config, int64_t prompt, int64_t answer) {
  const int64_t n = std::min(std::max<int64_t>(0, prompt) + std::max<int64_t>(0, answer), config.max_len);
  if (config.random_positions > 0) return spread_positions(n, config.random_positions);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  return out;
}

IntTensor step_position_ids(const std::vector<std::vector<int32_t>>& tables, const std::vector<int64_t>& rows,
                            int64_t pos) {
  IntTensor ids({static_cast<int64_t>(rows.size()), 1});
  for (size_t a = 0; a < rows.size(); ++a) ids.data[a] = tables.at(static_cast<size_t>(rows[a])).at(static_cast<size_t>(pos));
  return ids;
}

IntTensor prefix_position_ids(const std::vector<std::vector<int32_t>>& tables, const std::vector<int64_t>& rows,
                              int64_t t_len) {
  IntTensor ids({static_cast<int64_t>(rows.size()), t_len});
  for (size_t a = 0; a < rows.size(); ++a) {
    const auto& table = tables.at(static_cast<size_t>(rows[a]));
    const auto n = static_cast<int64_t>(table.size());
    for (int64_t t = 0; t < t_len; ++t)  // past the table: padding, which repeats its last position
      ids.data[a * static_cast<size_t>(t_len) + static_cast<size_t>(t)] = table.at(static_cast<size_t>(std::min(t, n - 1)));
  }
  return ids;
}

}  // namespace attnlab
