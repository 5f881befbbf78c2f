#pragma once
// Fused log-softmax + cross-entropy.
#include "framework/autograd.h"

namespace attnlab {

struct CrossEntropyOptions {
  int32_t ignore_index = -100;  // targets equal to this contribute nothing
  Real label_smoothing = 0;     // as torch: target = (1-eps)·onehot + eps/V
};

// logits (..., V), targets (...) -> the mean loss over the non-ignored
// positions, shape (). If every target is ignored the loss is 0 (torch gives
// NaN; we prefer a defined value). A target outside [0, V) that is not the
// ignore index throws ValueError.
Var cross_entropy(const Var& logits, const IntTensor& targets, const CrossEntropyOptions& options = {});

// One row's figures outside the graph, in double, as evaluation and the
// interventions score a target: its cross-entropy log Σ_v exp(x_v) − x_y
// (nats) and whether y is the row's first maximum (greedy decoding's pick).
struct RowScore {
  double loss = 0;
  bool right = false;
};
RowScore score_row(const Real* row, int64_t V, int32_t y);

}  // namespace attnlab
