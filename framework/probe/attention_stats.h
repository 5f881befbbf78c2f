#pragma once
// Per-head attention statistics: how peaked the attention weights are
// (entropy, max weight, saturation) and the size of the scaled logits
// s·q·k that produced them. Read-only observers.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "framework/nn/multi_head_attention.h"

namespace attnlab {

struct HeadStats {
  int64_t head = 0;
  int64_t rows = 0;          // query rows counted: every (b, i) whose weights are not all zero
  double entropy = 0;        // mean over rows of −Σ_j w_ij log w_ij (nats); log T_k for uniform rows
  double max_weight = 0;     // mean over rows of max_j w_ij
  double saturated = 0;      // fraction of rows with max_j w_ij > kSaturatedWeight
  double logit_mean = 0;     // mean of s·q_i·k_j over the counted entries (NaN without q and k)
  double logit_var = 0;      // their variance (population; NaN without q and k)
};

constexpr double kSaturatedWeight = 0.99;

// weights (B, h, T_q, T_k) as MultiHeadAttention::last_weights() gives them.
// q (B, h, T_q, d_k) and k (B, h, T_k, d_k): the inputs of the attention core
// (after any rotary rotation), or null to skip the logit statistics. Logit
// statistics count the entries with a non-zero weight: masked keys have
// weight exactly 0, and so do keys whose weight underflowed in float32 (a
// logit ~100 or more below its row's maximum; only in extreme saturation).
// A causal layer's first query sees one key and so counts as saturated.
// ShapeError for inconsistent shapes.
std::vector<HeadStats> attention_head_stats(const Tensor& weights, const Tensor* q = nullptr,
                                            const Tensor* k = nullptr, Real scale = 1);
struct AttentionInputs;
// The same with q and k as recorded_attention_inputs finds them (any layout).
std::vector<HeadStats> attention_head_stats(const Tensor& weights, const AttentionInputs& in, Real scale);

// Every MultiHeadAttention below `root` with its dotted path
// ("blocks.0.attn", "decoder.blocks.1.cross_attn"), in registration order,
// which for attnlab's models is also the order of the forward pass.
std::vector<std::pair<std::string, MultiHeadAttention*>> find_attention_modules(Module& root);

// The q and k inputs of every fused attention op recorded in the graph below
// `root` (so only while the graph is alive: after forward, before backward),
// in the order the ops ran. The composed path (attention dropout in training)
// records no fused op and is not found.
struct AttentionInputs {
  const Tensor* q = nullptr;  // (B, h, T_q, d_k), or (B, T_q, h·d_k) from attention_heads
  const Tensor* k = nullptr;  // (B, h, T_k, d_k), or (B, T_k, h·d_k)
  // From attention_packed, q and k are its one (B, T, h·(2·d_k + d_v)) input:
  // its row width and the column where k's heads start, h·d_k (q's at 0).
  int64_t packed_row = 0, packed_k_base = 0;
};
std::vector<AttentionInputs> recorded_attention_inputs(const Var& root);

}  // namespace attnlab
