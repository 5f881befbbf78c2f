// Incremental attention for KV-cached decoding: MultiHeadAttention's
// forward_step (self-attention over a growing cache) and forward_memory
// (cross-attention over keys and values computed once). Inference only: the
// results carry no graph.
#include <algorithm>
#include <string>

#include "framework/nn/multi_head_attention.h"
#include "framework/ops/rotary.h"
#include "framework/ops/shape.h"
#include "framework/ops/softmax.h"

namespace attnlab {

KvCache::KvCache(int64_t slots, int64_t capacity, int64_t key_width, int64_t value_width)
    : keys(Tensor::uninitialized({slots, capacity, key_width})),
      values(Tensor::uninitialized({slots, capacity, value_width})) {}

namespace {

using ConstStridedMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using Column = Eigen::Matrix<Real, Eigen::Dynamic, 1>;

struct HeadDims {
  int64_t h, d_k, d_v;
};

// ctx (B, h·d_v): row a of q (B, h·d_k), head by head, attends over the first
// cache.length keys and values of slot slots[a]: softmax(K q · scale) with
// padding keys at -inf (exactly 0 after the softmax, as in the fused kernel),
// then the weighted sum of the values.
Tensor attend_cached(const Tensor& q, const KvCache& c, const std::vector<int64_t>& slots, HeadDims n, Real scale) {
  const int64_t b = static_cast<int64_t>(slots.size()), len = c.length, cap = c.capacity();
  const int64_t kw = n.h * n.d_k, vw = n.h * n.d_v, pairs = b * n.h;
  const Real* pad = c.key_padding.numel() > 0 ? c.key_padding.data() : nullptr;
  Tensor ctx = Tensor::uninitialized({b, vw});
  const bool parallel = pairs > 1 && pairs * len * (n.d_k + n.d_v) >= kAttentionParallelMinFlops;
#pragma omp parallel if (parallel)
  {
    Column w(len);  // scores, then weights; one per thread
#pragma omp for schedule(static)
    for (int64_t p = 0; p < pairs; ++p) {
      const int64_t a = p / n.h, hh = p % n.h, s = slots[static_cast<size_t>(a)];
      ConstStridedMap K(c.keys.data() + s * cap * kw + hh * n.d_k, len, n.d_k, Eigen::OuterStride<>(kw));
      ConstStridedMap V(c.values.data() + s * cap * vw + hh * n.d_v, len, n.d_v, Eigen::OuterStride<>(vw));
      w.noalias() = K * ConstVecMap(q.data() + a * kw + hh * n.d_k, n.d_k);
      w *= scale;
      if (pad)
        for (int64_t j = 0; j < len; ++j)
          if (pad[s * cap + j] != 0) w[j] = kNegInf;
      softmax_row(w.data(), w.data(), len);  // a fully masked row -> all 0
      VecMap(ctx.data() + a * vw + hh * n.d_v, n.d_v).noalias() = V.transpose() * w;
    }
  }
  return ctx;
}

// Copies the rows of src (B, w) into slot slots[a], position `position` of dst (S, capacity, w).
void store_rows(const Tensor& src, Tensor& dst, const std::vector<int64_t>& slots, int64_t position) {
  const int64_t w = dst.size(2), cap = dst.size(1);
  for (size_t a = 0; a < slots.size(); ++a) {
    const Real* from = src.data() + static_cast<int64_t>(a) * w;
    std::copy(from, from + w, dst.data() + (slots[a] * cap + position) * w);
  }
}

}  // namespace

void MultiHeadAttention::check_step_input(const Var& x, const std::vector<int64_t>& slots,
                                          const KvCache& cache) const {
  const int64_t d = opt_.d_model;
  if (x.dim() != 3 || x.size(1) != 1 || x.size(2) != d)
    throw ShapeError("MultiHeadAttention: a decoding step expects x of shape (B, 1, " + std::to_string(d) +
                     "), got " + x.value().shape_str());
  if (x.size(0) != static_cast<int64_t>(slots.size()))
    throw ShapeError("MultiHeadAttention: x " + x.value().shape_str() + " has " + std::to_string(x.size(0)) +
                     " rows for " + std::to_string(slots.size()) + " cache slots");
  for (int64_t s : slots)
    if (s < 0 || s >= cache.slots())
      throw ShapeError("MultiHeadAttention: cache slot " + std::to_string(s) + " out of range [0, " +
                       std::to_string(cache.slots()) + ")");
}

MultiHeadAttention::StepProjections MultiHeadAttention::project_step(const Var& x, int64_t position) const {
  const int64_t b = x.size(0);
  Var q = x, k = x, v = x;  // parameter-free: the rows themselves (v never rotated)
  if (opt_.projections) {
    const Projections p = project(x, Var());  // as forward: one product
    q = p.q;  // (B, 1, h·d_k)
    k = p.k;
    v = p.v;  // (B, 1, h·d_v)
  }
  if (opt_.rope) {  // as forward does, at this step's position
    q = rotary_heads(q, opt_.n_heads, position);
    k = rotary_heads(k, opt_.n_heads, position);
  }
  return {q.value().reshaped({b, opt_.n_heads * opt_.d_k}), k.value().reshaped({b, opt_.n_heads * opt_.d_k}),
          v.value().reshaped({b, opt_.n_heads * opt_.d_v})};
}

Var MultiHeadAttention::step_output(Tensor ctx) const {
  const int64_t b = ctx.size(0), w = ctx.size(1);
  ctx.reshape_({b, 1, w});
  Var c(std::move(ctx));
  return opt_.projections ? out_proj->forward(c) : c;  // (B, 1, d)
}

Var MultiHeadAttention::forward_step(const Var& x, KvCache& cache, const std::vector<int64_t>& slots) const {
  check_step_input(x, slots, cache);
  if (cache.keys.size(2) != opt_.n_heads * opt_.d_k || cache.values.size(2) != opt_.n_heads * opt_.d_v)
    throw ShapeError("MultiHeadAttention: cache of widths " + std::to_string(cache.keys.size(2)) + ", " +
                     std::to_string(cache.values.size(2)) + " does not fit h·d_k = " +
                     std::to_string(opt_.n_heads * opt_.d_k) + ", h·d_v = " + std::to_string(opt_.n_heads * opt_.d_v));
  if (cache.length >= cache.capacity())
    throw ShapeError("MultiHeadAttention: the cache is full (" + std::to_string(cache.capacity()) + " positions)");
  const int64_t position = cache.length;
  StepProjections p = project_step(x, position);
  store_rows(p.k, cache.keys, slots, position);
  store_rows(p.v, cache.values, slots, position);
  cache.length = position + 1;
  return step_output(attend_cached(p.q, cache, slots, {opt_.n_heads, opt_.d_k, opt_.d_v}, scale_));
}

KvCache MultiHeadAttention::memory_cache(const Var& memory, const Tensor* key_padding) const {
  if (opt_.rope) throw ValueError("MultiHeadAttention: cached cross-attention does not take rotary positions");
  if (memory.dim() != 3 || memory.size(2) != opt_.kv_dim)
    throw ShapeError("MultiHeadAttention: memory of shape " + memory.value().shape_str() +
                     " does not fit: expected (B, T_k, kv_dim = " + std::to_string(opt_.kv_dim) + ")");
  const int64_t b = memory.size(0), t_k = memory.size(1);
  if (key_padding) check_shape(key_padding->shape(), {b, t_k}, "MultiHeadAttention key_padding (B, T_k)");
  KvCache c;
  if (opt_.projections) {
    const Projections p = project_memory(memory);  // as forward: one product
    c.keys = p.k.value();                          // (B, T_k, h·d_k)
    c.values = p.v.value();                        // (B, T_k, h·d_v)
  } else {
    c.keys = c.values = memory.value();
  }
  if (key_padding) c.key_padding = *key_padding;
  c.length = t_k;
  return c;
}

Var MultiHeadAttention::forward_memory(const Var& x, const KvCache& memory, const std::vector<int64_t>& slots) const {
  check_step_input(x, slots, memory);
  if (opt_.rope) throw ValueError("MultiHeadAttention: cached cross-attention does not take rotary positions");
  const int64_t b = x.size(0);
  Tensor q = (opt_.projections ? q_proj->forward(x) : x).value().reshaped({b, opt_.n_heads * opt_.d_k});
  return step_output(attend_cached(q, memory, slots, {opt_.n_heads, opt_.d_k, opt_.d_v}, scale_));
}

}  // namespace attnlab
