#include "framework/ops/composed.h"

#include "framework/ops/elementwise.h"
#include "framework/ops/matmul.h"
#include "framework/ops/reduce.h"
#include "framework/ops/shape.h"
#include "framework/ops/softmax.h"

namespace attnlab {
Var split_heads(const Var& x, int64_t h) {
  const int64_t b = x.size(0), t = x.size(1), w = x.size(2) / h;
  if (h == 1) return reshape(x, {b, 1, t, w});  // same memory order: no transpose needed
  return transpose(reshape(x, {b, t, h, w}), 1, 2);
}

Var merge_heads(const Var& x) {
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), w = x.size(3);
  if (h == 1) return reshape(x, {b, t, w});
  return reshape(transpose(x, 1, 2), {b, t, h * w});
}

Var masked_scores(const Var& q, const Var& k, Real scale, const AttentionMask& mask) {
  Var scores = attnlab::scale(matmul(q, k, false, true), scale);
  if (!mask.causal && !mask.key_padding) return scores;
  const int64_t B = q.size(0), t_q = q.size(2), t_k = k.size(2);
  Tensor hidden({B, 1, t_q, t_k});  // 1 = masked; broadcasts over heads
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < t_q; ++i)
      for (int64_t j = 0; j < t_k; ++j) {
        const bool future = mask.causal && j > i + (t_k - t_q);
        const bool padding = mask.key_padding && (*mask.key_padding)[b * t_k + j] != 0;
        hidden[(b * t_q + i) * t_k + j] = future || padding ? 1 : 0;
      }
  return masked_fill(scores, hidden, kNegInf);
}

Var composed_layer_norm(const Var& x, const Var& weight, const Var& bias, Real eps) {
  Var centred = sub(x, mean(x, -1, true));
  Var variance = mean(mul(centred, centred), -1, true);
  Var y = div(centred, sqrt(add_scalar(variance, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

Var composed_attention(const Var& q, const Var& k, const Var& v, Real scale, const AttentionMask& mask) {
  return matmul(softmax(masked_scores(q, k, scale, mask)), v);
}

Var composed_attention_heads(const Var& q, const Var& k, const Var& v, int64_t n_heads, Real scale,
                             const AttentionMask& mask) {
  return merge_heads(
      composed_attention(split_heads(q, n_heads), split_heads(k, n_heads), split_heads(v, n_heads), scale, mask));
}

Var composed_attention_packed(const Var& qkv, int64_t n_heads, int64_t d_k, int64_t d_v, Real scale,
                              const AttentionMask& mask) {
  std::vector<Var> parts = split(qkv, -1, {n_heads * d_k, n_heads * d_k, n_heads * d_v});
  return composed_attention_heads(parts[0], parts[1], parts[2], n_heads, scale, mask);
}

GraphBackwardFn composed_graph_backward(std::function<Var(const std::vector<Var>&)> composed) {
  return [composed = std::move(composed)](const std::vector<Var>& inputs, const Var&, const Var& grad) {
    std::vector<Var> copies;
    for (const Var& in : inputs) copies.push_back(reshape(in, in.shape()));
    return grad_graph({composed(copies)}, {grad}, copies);
  };
}

}  // namespace attnlab
