#pragma once
// What the ablation tests compare: every pass's logits, kept by pass, and
// bitwise equality of two passes.
#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "interventions/ablation.h"

namespace attnlab::testing {

// Every pass's logits, by row (-1: the intact pass), batch after batch.
struct Logits {
  std::map<int64_t, std::vector<Tensor>> by_row;
  AblationLogits sink() {
    return [this](int64_t row, size_t, const Tensor& t) { by_row[row].push_back(t); };
  }
};

inline bool bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].shape() != b[i].shape() || !std::equal(a[i].data(), a[i].data() + a[i].numel(), b[i].data())) return false;
  return true;
}

}  // namespace attnlab::testing
