#pragma once
// The fused attention core: out = softmax(Q Kᵀ · scale + mask) V, per batch
// and head, with a hand-written backward. Parallel over batch x heads.
#include "framework/autograd.h"

namespace attnlab {

// One (batch, head) pair costs ~T_q·T_k·(d_k + d_v) multiply-adds; below this much work in
// total a thread team costs more than it saves (the fused kernels here and KV-cached decoding).
inline constexpr int64_t kAttentionParallelMinFlops = 1 << 16;

struct AttentionMask {
  bool causal = false;        // query i may not see key j > i + (T_k - T_q)
  const Tensor* key_padding = nullptr;  // (B, T_k): non-zero = padding key, never attended
};

// q (B, h, T_q, d_k), k (B, h, T_k, d_k), v (B, h, T_k, d_v) -> (B, h, T_q, d_v).
// If `weights_out` is given it receives the attention weights (B, h, T_q, T_k).
// A fully masked query row attends to nothing: its weights and output are 0.
Var attention(const Var& q, const Var& k, const Var& v, Real scale, const AttentionMask& mask = {},
              Tensor* weights_out = nullptr);

// The same kernel on the head-interleaved layout the projections produce:
// q (B, T_q, h·d_k), k (B, T_k, h·d_k), v (B, T_k, h·d_v) -> (B, T_q, h·d_v),
// head i owning columns [i·d, (i+1)·d). Equal to splitting heads, attention()
// and merging heads, without the copies. Weights as above, (B, h, T_q, T_k).
Var attention_heads(const Var& q, const Var& k, const Var& v, int64_t n_heads, Real scale,
                    const AttentionMask& mask = {}, Tensor* weights_out = nullptr);

// Self-attention read in place from the fused Q/K/V product:
// qkv (B, T, h·(2·d_k + d_v)), each token's row [q heads | k heads | v heads]
// with head i of each owning d columns from i·d, -> (B, T, h·d_v). Equal to
// attention_heads on the three column blocks, without splitting them: the
// gradient is written into one buffer of qkv's shape, which the stacked
// projection's backward reads as it is.
Var attention_packed(const Var& qkv, int64_t n_heads, int64_t d_k, int64_t d_v, Real scale,
                     const AttentionMask& mask = {}, Tensor* weights_out = nullptr);

}  // namespace attnlab
