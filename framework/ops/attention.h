#pragma once
// The fused attention core: out = softmax(Q Kᵀ · scale + mask) V, per batch
// and head, with a hand-written backward. Parallel over batch x heads.
#include "framework/autograd.h"

namespace attnlab {

struct AttentionMask {
  bool causal = false;        // query i may not see key j > i + (T_k - T_q)
  const Tensor* key_padding = nullptr;  // (B, T_k): non-zero = padding key, never attended
};

// q (B, h, T_q, d_k), k (B, h, T_k, d_k), v (B, h, T_k, d_v) -> (B, h, T_q, d_v).
// If `weights_out` is given it receives the attention weights (B, h, T_q, T_k).
// A fully masked query row attends to nothing: its weights and output are 0.
Var attention(const Var& q, const Var& k, const Var& v, Real scale, const AttentionMask& mask = {},
              Tensor* weights_out = nullptr);

}  // namespace attnlab
