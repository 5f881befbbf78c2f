#pragma once
// Multi-head attention (Vaswani et al., 2017, section 3.2), self or cross,
// with optional masks, rotary positions, dropout on the weights, and a
// parameter-free variant.
#include <memory>
#include <string>
#include <vector>

#include "framework/nn/hook_points.h"
#include "framework/nn/linear.h"
#include "framework/ops/attention.h"

namespace attnlab {

// The factor s in softmax(Q Kᵀ · s). Text forms: "sqrt" (1/sqrt(d_k), the
// paper's and the default), "none" (1), "linear" (1/d_k, as muP), or a
// positive number used as is.
struct AttentionScale {
  enum class Kind { inv_sqrt, none, inv_linear, constant };
  Kind kind = Kind::inv_sqrt;
  Real constant = 1;  // used when kind == constant

  Real value(int64_t d_k) const;
  std::string str() const;  // the text form; parse_attention_scale(str()) gives it back
};
// Throws ValueError naming the text unless it is one of the forms above.
AttentionScale parse_attention_scale(const std::string& text);

// The keys and values of positions already read, kept for incremental
// (KV-cached) decoding: one slot per sequence, every slot filled to the same
// length (the decoders step all their sequences through the same position).
// A self-attention cache grows by one position per step; a cross-attention
// memory is filled once, with its key padding.
struct KvCache {
  KvCache() = default;
  // Room for `capacity` positions in each of `slots` slots; length 0.
  KvCache(int64_t slots, int64_t capacity, int64_t key_width, int64_t value_width);
  int64_t slots() const { return keys.numel() ? keys.size(0) : 0; }
  int64_t capacity() const { return keys.numel() ? keys.size(1) : 0; }

  Tensor keys;          // (S, capacity, h·d_k), rotated when rope is on
  Tensor values;        // (S, capacity, h·d_v)
  Tensor key_padding;   // (S, capacity), non-zero = never attended; empty = none
  int64_t length = 0;   // positions filled, in every slot
};

struct MultiHeadAttentionOptions {
  int64_t d_model = 0;  // d: width of the queries' sequence and of the output
  int64_t n_heads = 1;  // h
  int64_t d_k = 0;      // query/key width per head; 0 -> d / h (h must divide d)
  int64_t d_v = 0;      // value width per head;     0 -> d / h (h must divide d)
  AttentionScale scale;
  // false: parameter-free dot-product attention, one head over the whole
  // width: weights softmax(x_i · m_j · s) with s from `scale` at d_k = d, output
  // the weighted average of the memory rows m_j themselves. n_heads, d_k and
  // d_v are then ignored, and kv_dim must be d.
  bool projections = true;
  bool bias = true;     // false: the projections have no bias (ignored without projections)
  Real dropout = 0;     // on the attention weights, in training mode only (as torch)
  bool rope = false;    // rotate each head of q and k by position (rotary_heads; d_k even)
  int64_t kv_dim = 0;   // cross-attention memory width; 0 -> d
};

class MultiHeadAttention : public Module {
 public:
  // Checks and resolves the options (ValueError naming the values when they
  // are inconsistent). Children q_proj (d -> h·d_k), k_proj (kv_dim -> h·d_k),
  // v_proj (kv_dim -> h·d_v), out_proj (h·d_v -> d), all with bias or (options.bias
  // false) none, are initialised from `init` in that order (see Linear). Keeps a pointer to
  // dropout_rng, which must outlive the module.
  MultiHeadAttention(const MultiHeadAttentionOptions& options, Rng& init, Rng& dropout_rng);

  // x (B, T_q, d); memory (B, T_k, kv_dim), or undefined for self-attention
  // (memory = x). causal: query i sees keys j <= i + (T_k − T_q).
  // key_padding (B, T_k), non-zero = padding key that is never attended.
  // Returns (B, T_q, d). Wrong shapes throw ShapeError naming them.
  // Rotary positions start at 0 for both queries and keys.
  Var forward(const Var& x, const Var& memory = Var(), bool causal = false, const Tensor* key_padding = nullptr);

  // Incremental self-attention, one position per call: x (B, 1, d) is the
  // next position, cache.length, of the sequences in cache slots `slots` (B of
  // them, distinct). Their keys and values are stored there, cache.length
  // advances, and each row attends over its slot's positions 0..length-1:
  // what forward(x_full, Var(), true) computes for that position, where
  // x_full holds every position of the sequence. Rotary positions use the
  // absolute position. A full cache or wrong shapes throw ShapeError. No
  // hook point is passed.
  Var forward_step(const Var& x, KvCache& cache, const std::vector<int64_t>& slots) const;
  // The keys and values of a cross-attention memory (B, T_k, kv_dim), computed
  // once for every decoding step; key_padding (B, T_k) or null.
  KvCache memory_cache(const Var& memory, const Tensor* key_padding) const;
  // x (B, 1, d) of the sequences in `slots` attends over their memory, as
  // forward(x, memory, false, key_padding) does per query row. Not with rope
  // (ValueError: cross-attention has no shared positions).
  Var forward_memory(const Var& x, const KvCache& memory, const std::vector<int64_t>& slots) const;

  // Declares this layer's hook points, prefix + scores (B, h, T_q, T_k),
  // pattern (the same, after the softmax, before dropout), z (B, T_q, h·d_v:
  // head hh's output in columns hh·d_v .. (hh+1)·d_v − 1, before out_proj) and
  // out (B, T_q, d), which forward then passes (docs/hooks.md). Observing the
  // pattern keeps the fused kernel (its weights are copied out); a hook on
  // the scores, or one replacing the pattern, takes the composed path.
  void attach_hooks(HookTable& table, const std::string& prefix);

  const MultiHeadAttentionOptions& options() const { return opt_; }  // resolved: d_k, d_v, kv_dim filled in
  int64_t n_heads() const { return opt_.n_heads; }
  int64_t d_k() const { return opt_.d_k; }
  int64_t d_v() const { return opt_.d_v; }
  Real scale() const { return scale_; }

  // Null when options.projections is false.
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;

 private:
  MultiHeadAttentionOptions opt_;
  // The projections q (B, T_q, h·d_k), k (B, T_k, h·d_k), v (B, T_k, h·d_v) of
  // x and the memory; self-attention when memory is undefined or x itself.
  // Self-attention computes the three as one product, cross-attention k and v
  // (see multi_head_attention.cpp for why the parameters stay three).
  struct Projections {
    Var q, k, v;
  };
  Projections project(const Var& x, const Var& memory) const;
  Projections project_memory(const Var& memory) const;  // k and v only, one product
  // q, k, v of new rows x (B, 1, d) at `position`, as (B, h·w) tensors;
  // k and q rotated when rope is on.
  struct StepProjections {
    Tensor q, k, v;
  };
  StepProjections project_step(const Var& x, int64_t position) const;
  void check_step_input(const Var& x, const std::vector<int64_t>& slots, const KvCache& cache) const;
  // ctx (B, h·d_v) -> (B, 1, d): out_proj, or the context itself without projections.
  Var step_output(Tensor ctx) const;

  // The pattern observed outside the composed path (weights copied out of a
  // fused kernel, or null), then z and out through their hook points.
  Var output(Var ctx, const Tensor* weights) const;

  Real scale_;
  Rng* dropout_rng_;
  HookSite hooks_;
};

// The attention core composed of primitive ops (matmul, scale, masked_fill,
// softmax, dropout, matmul), with the fused op's shapes and mask semantics.
// MultiHeadAttention uses it when dropout on the weights is active (the fused
// op has no dropout); the tests use it as the reference for the fused op.
// With weights_out, receives the weights (B, h, T_q, T_k) before dropout;
// with hooks, passes the scores and the pattern through their hook points.
// (framework/ops/composed.h has the plain one, without dropout or hooks.)
Var composed_attention(const Var& q, const Var& k, const Var& v, Real scale, const AttentionMask& mask,
                       Real dropout_p, Rng* dropout_rng, bool training, Tensor* weights_out,
                       const HookSite* hooks);

}  // namespace attnlab
