#include "framework/probe/attention_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace attnlab {

std::vector<HeadStats> attention_head_stats(const Tensor& weights, const Tensor* q, const Tensor* k, Real scale) {
  return attention_head_stats(weights, AttentionInputs{q, k}, scale);
}

namespace {

// Where the heads of q and k lie. They come head-major (B, h, T, d_k) from
// attention(), interleaved (B, T, h·d_k) from attention_heads(), or as columns
// of attention_packed's one input (B, T, h·(2·d_k + d_v)); each is read in place.
struct QkLayout {
  bool logits = false, interleaved = false;
  int64_t d_k = 0, row = 0, k_base = 0;  // row, k_base: interleaved only
};

QkLayout qk_layout(const AttentionInputs& in, int64_t B, int64_t h, int64_t T_q, int64_t T_k) {
  QkLayout l;
  const Tensor *q = in.q, *k = in.k;
  l.logits = q && k;
  if (!l.logits) return l;
  l.interleaved = q->dim() == 3;
  if (in.packed_row > 0) {
    l.d_k = in.packed_k_base / h;
    l.row = in.packed_row;
    l.k_base = in.packed_k_base;
    check_shape(q->shape(), {B, T_q, l.row}, "attention_head_stats packed q/k/v (B, T, h*(2*d_k + d_v))");
    check_shape(k->shape(), {B, T_k, l.row}, "attention_head_stats packed q/k/v (B, T, h*(2*d_k + d_v))");
    return l;
  }
  l.d_k = l.interleaved ? q->size(-1) / h : q->size(-1);
  l.row = h * l.d_k;
  if (l.interleaved) {
    check_shape(q->shape(), {B, T_q, h * l.d_k}, "attention_head_stats q (B, T_q, h*d_k)");
    check_shape(k->shape(), {B, T_k, h * l.d_k}, "attention_head_stats k (B, T_k, h*d_k)");
  } else {
    check_shape(q->shape(), {B, h, T_q, l.d_k}, "attention_head_stats q (B, h, T_q, d_k)");
    check_shape(k->shape(), {B, h, T_k, l.d_k}, "attention_head_stats k (B, h, T_k, d_k)");
  }
  return l;
}

using ConstStridedMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

// One head of batch row b of q (base 0) or k (base l.k_base), read in place: (T, d_k).
ConstStridedMap head_rows(const QkLayout& l, const Tensor* t, int64_t base, int64_t T, int64_t b, int64_t h,
                          int64_t head) {
  if (l.interleaved)
    return ConstStridedMap(t->data() + b * T * l.row + base + head * l.d_k, T, l.d_k, Eigen::OuterStride<>(l.row));
  return ConstStridedMap(t->data() + (b * h + head) * T * l.d_k, T, l.d_k, Eigen::OuterStride<>(l.d_k));
}

}  // namespace

std::vector<HeadStats> attention_head_stats(const Tensor& weights, const AttentionInputs& in, Real scale) {
  if (weights.dim() != 4) throw ShapeError("attention_head_stats: expected weights (B, h, T_q, T_k), got " +
                                           weights.shape_str());
  const int64_t B = weights.size(0), h = weights.size(1), T_q = weights.size(2), T_k = weights.size(3);
  const QkLayout layout = qk_layout(in, B, h, T_q, T_k);
  const bool logits = layout.logits;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<HeadStats> out(static_cast<size_t>(h));
  RowMatrix S(T_q, T_k);
  for (int64_t head = 0; head < h; ++head) {
    HeadStats& s = out[static_cast<size_t>(head)];
    s.head = head;
    double sum_entropy = 0, sum_max = 0, saturated = 0, sum_l = 0, sum_l2 = 0;
    int64_t entries = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t bh = b * h + head;
      ConstMatMap W(weights.data() + bh * T_q * T_k, T_q, T_k);
      if (logits)
        S.noalias() = scale * head_rows(layout, in.q, 0, T_q, b, h, head) *
                      head_rows(layout, in.k, layout.k_base, T_k, b, h, head).transpose();
      for (int64_t i = 0; i < T_q; ++i) {
        double entropy = 0, max_w = 0, total = 0;
        for (int64_t j = 0; j < T_k; ++j) {
          const double w = W(i, j);
          if (w <= 0) continue;
          entropy -= w * std::log(w);
          max_w = std::max(max_w, w);
          total += w;
          if (logits) {
            const double l = S(i, j);
            sum_l += l;
            sum_l2 += l * l;
            ++entries;
          }
        }
        if (total <= 0) continue;  // fully masked row: attends to nothing
        ++s.rows;
        sum_entropy += entropy;
        sum_max += max_w;
        saturated += max_w > kSaturatedWeight ? 1 : 0;
      }
    }
    const double n = static_cast<double>(std::max<int64_t>(s.rows, 1));
    s.entropy = sum_entropy / n;
    s.max_weight = sum_max / n;
    s.saturated = saturated / n;
    if (logits && entries > 0) {
      s.logit_mean = sum_l / static_cast<double>(entries);
      s.logit_var = std::max(0.0, sum_l2 / static_cast<double>(entries) - s.logit_mean * s.logit_mean);
    } else {
      s.logit_mean = s.logit_var = nan;
    }
  }
  return out;
}

namespace {
void collect_attention(Module& m, const std::string& prefix,
                       std::vector<std::pair<std::string, MultiHeadAttention*>>& out) {
  for (const auto& [name, child] : m.children()) {
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    if (auto* mha = dynamic_cast<MultiHeadAttention*>(child.get())) out.emplace_back(path, mha);
    collect_attention(*child, path, out);
  }
}
}  // namespace

std::vector<std::pair<std::string, MultiHeadAttention*>> find_attention_modules(Module& root) {
  std::vector<std::pair<std::string, MultiHeadAttention*>> out;
  collect_attention(root, "", out);
  return out;
}

std::vector<AttentionInputs> recorded_attention_inputs(const Var& root) {
  std::vector<Node*> found;
  if (!root.defined()) return {};
  std::unordered_set<Node*> seen{root.node()};
  std::vector<Node*> stack{root.node()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    const bool fused = std::strcmp(n->op, "attention") == 0 || std::strcmp(n->op, "attention_heads") == 0;
    if ((fused && n->inputs.size() >= 2) || std::strcmp(n->op, "attention_packed") == 0) found.push_back(n);
    for (const auto& in : n->inputs)
      if (seen.insert(in.get()).second) stack.push_back(in.get());
  }
  std::sort(found.begin(), found.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
  std::vector<AttentionInputs> out;
  out.reserve(found.size());
  for (Node* n : found) {
    if (std::strcmp(n->op, "attention_packed") != 0) {
      out.push_back({&n->inputs[0]->value, &n->inputs[1]->value});
      continue;
    }
    // k's heads start after q's h·d_k columns: half of what the output's
    // h·d_v columns leave of the packed row h·(2·d_k + d_v).
    const Tensor& qkv = n->inputs[0]->value;
    AttentionInputs in{&qkv, &qkv};
    in.packed_row = qkv.size(2);
    in.packed_k_base = (qkv.size(2) - n->value.size(2)) / 2;
    out.push_back(in);
  }
  return out;
}

}  // namespace attnlab
