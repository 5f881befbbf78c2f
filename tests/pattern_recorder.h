#pragma once
// A standalone attention layer's pattern (B, h, T_q, T_k), recorded through
// its hook point as a model's instruments record it (tests only).
#include <cstdint>
#include <string>

#include "framework/nn/multi_head_attention.h"

namespace attnlab {

struct PatternRecorder {
  explicit PatternRecorder(MultiHeadAttention& mha) {
    mha.attach_hooks(table, "");
    id = table.observe("pattern", [this](const std::string&, const Var& w) { weights = w.value(); });
  }
  PatternRecorder(const PatternRecorder&) = delete;
  PatternRecorder& operator=(const PatternRecorder&) = delete;
  void stop() { table.remove(id); }

  HookTable table;
  Tensor weights;  // of the last forward while recording; empty before
  int64_t id = -1;
};

}  // namespace attnlab
