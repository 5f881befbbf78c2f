#pragma once
// The fused kernels' math written in primitive ops. The tests hold each fused
// kernel to its composed form (values and gradients), and the attention
// kernels recorded for second order (SecondOrderGuard) take their
// differentiable backward from it: the composed forward rebuilt from the op's
// inputs and differentiated by grad_graph. (Layer norm has its own:
// framework/ops/norm.cpp, layer_norm_graph_grads.)
#include <functional>
#include <vector>

#include "framework/ops/attention.h"

namespace attnlab {

// (x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased
// variance, as torch.nn.LayerNorm); either affine term may be undefined.
Var composed_layer_norm(const Var& x, const Var& weight, const Var& bias, Real eps);

// (B, T, h·w) -> (B, h, T, w), and back.
Var split_heads(const Var& x, int64_t h);
Var merge_heads(const Var& x);

// Q Kᵀ · scale with the masked scores at -inf: (B, h, T_q, T_k) from
// q (B, h, T_q, d_k), k (B, h, T_k, d_k).
Var masked_scores(const Var& q, const Var& k, Real scale, const AttentionMask& mask);
// softmax(masked_scores) V on (B, h, T, d) heads; a fully masked query row
// gets weights 0, as the fused kernel's.
Var composed_attention(const Var& q, const Var& k, const Var& v, Real scale, const AttentionMask& mask);
// The same on heads interleaved in the last axis: q, k (B, T, h·d_k), v (B, T_k, h·d_v).
Var composed_attention_heads(const Var& q, const Var& k, const Var& v, int64_t n_heads, Real scale,
                             const AttentionMask& mask);
// The same from the fused projection's qkv (B, T, h·(2·d_k + d_v)).
Var composed_attention_packed(const Var& qkv, int64_t n_heads, int64_t d_k, int64_t d_v, Real scale,
                              const AttentionMask& mask);

// A graph backward from a composed form of the op: each input is passed
// through its own copy (so an input given twice gets each slot's part), the
// composed output rebuilt, and grad_graph taken against the seed.
GraphBackwardFn composed_graph_backward(std::function<Var(const std::vector<Var>&)> composed);

}  // namespace attnlab
