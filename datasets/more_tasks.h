#pragma once
// Internal to datasets/: the constructors of the attention probes (induction,
// recall, repeat) and of the tasks read from files (pairs, text), one .cpp each.
#include <algorithm>
#include <limits>
#include <memory>
#include <unordered_set>
#include <vector>

#include "datasets/task.h"

namespace attnlab {

std::unique_ptr<Task> make_induction_task(const TaskConfig& config);
std::unique_ptr<Task> make_recall_task(const TaskConfig& config);
std::unique_ptr<Task> make_repeat_task(const TaskConfig& config);
std::unique_ptr<Task> make_pairs_task(const TaskConfig& config);
std::unique_ptr<Task> make_text_task(const TaskConfig& config);
std::unique_ptr<Task> make_modular_task(const TaskConfig& config);

// modular (datasets/modular.cpp): p² pairs (div: p(p - 1)), round(f × pairs) of
// them in the training set; check_modular throws the ValueErrors of
// TaskConfig::validate for a modular config.
constexpr int64_t kMaxModulus = 1000;  // a million pairs, built in memory
int64_t modular_pair_count(const TaskConfig& c);
int64_t modular_train_count(const TaskConfig& c);
void check_modular(const TaskConfig& c);

// `count` distinct integers from [0, n), in random order (count <= n).
inline std::vector<int64_t> draw_distinct(Rng& rng, int64_t n, int64_t count) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  if (n <= 4 * count + 64) {  // small range: a partial Fisher-Yates shuffle
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    for (int64_t i = 0; i < count; ++i) {
      std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(rng.integer(i, n - 1))]);
      out.push_back(all[static_cast<size_t>(i)]);
    }
    return out;
  }
  std::unordered_set<int64_t> seen;  // large range: rejections are rare
  while (static_cast<int64_t>(out.size()) < count) {
    const int64_t x = rng.integer(0, n - 1);
    if (seen.insert(x).second) out.push_back(x);
  }
  return out;
}

// n (n-1) ... (n-k+1), saturating at INT64_MAX like the other input counts.
inline int64_t saturating_permutations(int64_t n, int64_t k) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  int64_t p = 1;
  for (int64_t i = 0; i < k; ++i) {
    if (n - i <= 0) return 0;
    if (p > big / (n - i)) return big;
    p *= n - i;
  }
  return p;
}
inline int64_t saturating_times(int64_t a, int64_t b) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  return (b != 0 && a > big / b) ? big : a * b;
}
inline int64_t saturating_plus(int64_t a, int64_t b) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  return (a > big - b) ? big : a + b;
}

}  // namespace attnlab
