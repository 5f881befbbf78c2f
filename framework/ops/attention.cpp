// The fused attention core, forward and backward, one (batch, head) pair per
// task. Forward caches the attention weights P (B, h, T_q, T_k); backward is
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),
//   dQ = dS K · scale,  dK = dSᵀ Q · scale.
#include "framework/ops/attention.h"

#include "framework/ops/composed.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "framework/ops/gemm.h"
#include "framework/ops/softmax.h"

namespace attnlab {
namespace {

struct Dims {
  int64_t B, h, T_q, T_k, d_k, d_v;
};

// Where the (T, w) matrix of batch b, head hh starts, and its row stride, in
// a head-major (B, h, T, w) tensor or a head-interleaved (B, T, h·w) one. The
// interleaved layout is what the Q/K/V projections produce, so reading it in
// place saves the split-heads and merge-heads copies of the layer.
// In attention_packed's (B, T, h·(2·d_k + d_v)) tensor a token's row is wider
// than h·w and each of Q, K, V starts at its own column.
struct HeadLayout {
  int64_t T, w, h;
  bool interleaved;
  int64_t row = 0;   // interleaved: a token's row width; 0 = h·w
  int64_t base = 0;  // interleaved: the column where this tensor's heads start
  int64_t row_width() const { return row > 0 ? row : h * w; }
  int64_t offset(int64_t b, int64_t hh) const {
    return interleaved ? b * T * row_width() + base + hh * w : (b * h + hh) * T * w;
  }
  int64_t stride() const { return interleaved ? row_width() : w; }
};
// Where q, k, v and the output live. packed: q, k and v are one input (attention_packed).
struct Layouts {
  HeadLayout q, k, v, o;
  bool packed;
  const char* op;
};
Layouts unpacked(const Dims& n, bool interleaved) {
  return {{n.T_q, n.d_k, n.h, interleaved},
          {n.T_k, n.d_k, n.h, interleaved},
          {n.T_k, n.d_v, n.h, interleaved},
          {n.T_q, n.d_v, n.h, interleaved},
          false,
          interleaved ? "attention_heads" : "attention"};
}
// An input's values: fp32 (null once freed: ValueReads) and, where every product
// of the heads runs in bf16, its bf16 copy in the same layout (else null).
struct Source {
  const Real* data;
  const uint16_t* bf16;
};
// The (T, w) matrix of batch b, head hh, as a product operand (its transpose
// with trans set) or as a product's destination.
GemmOperand head(const Source& s, const HeadLayout& l, int64_t b, int64_t hh, bool trans = false) {
  const int64_t at = l.offset(b, hh);
  GemmOperand o{s.data ? s.data + at : nullptr, l.T, l.w, l.stride(), trans};
  if (s.bf16) o.bf16 = s.bf16 + at, o.bf16_ld = l.stride();
  return o;
}
GemmOperand head(const Real* data, const HeadLayout& l, int64_t b, int64_t hh, bool trans = false) {
  return head(Source{data, nullptr}, l, b, hh, trans);
}
Source source(const Tensor& value, const std::vector<Bf16Copy>* copies, size_t input) {
  return {value.data(), copies ? (*copies)[input].data() : nullptr};
}
GemmOutput head_out(Real* data, const HeadLayout& l, int64_t b, int64_t hh) {
  return {data + l.offset(b, hh), l.T, l.w, l.stride()};
}
// A contiguous (rows, cols) matrix: the scores and weights of one (b, h) pair.
GemmOperand square(const Real* data, int64_t rows, int64_t cols, bool trans = false) {
  return {data, rows, cols, cols, trans};
}

Dims check_shapes(const Var& q, const Var& k, const Var& v, const AttentionMask& mask) {
  auto shapes = [&] {
    return "q " + q.value().shape_str() + ", k " + k.value().shape_str() + ", v " + v.value().shape_str();
  };
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw ShapeError("attention: q, k, v must be 4-d (B, h, T, d), got " + shapes());
  const Shape &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  if (qs[0] != ks[0] || qs[0] != vs[0] || qs[1] != ks[1] || qs[1] != vs[1])
    throw ShapeError("attention: batch and head dims of q, k, v must match, got " + shapes());
  if (qs[3] != ks[3]) throw ShapeError("attention: q and k must share d_k, got " + shapes());
  if (ks[2] != vs[2]) throw ShapeError("attention: k and v must share T_k, got " + shapes());
  if (mask.key_padding && mask.key_padding->shape() != Shape{qs[0], ks[2]})
    throw ShapeError("attention: key_padding must have shape " + shape_str({qs[0], ks[2]}) + " (B, T_k), got " +
                     mask.key_padding->shape_str());
  return {qs[0], qs[1], qs[2], ks[2], qs[3], vs[3]};
}

// inputs: {q, k, v}, or {qkv} when packed.
Var attention_core(const std::vector<Var>& inputs, const Dims n, const Layouts& layouts, Real scale,
                   const AttentionMask& mask, Tensor* weights_out) {
  const HeadLayout lq = layouts.q, lk = layouts.k, lv = layouts.v, lo = layouts.o;
  const bool packed = layouts.packed;
  const Var& q = inputs[0];
  const Var& k = inputs[packed ? 0 : 1];
  const Var& v = inputs[packed ? 0 : 2];
  const int64_t pairs = n.B * n.h;
  const bool parallel = pairs > 1 && pairs * n.T_q * n.T_k * (n.d_k + n.d_v) >= kAttentionParallelMinFlops;

  // Precision bf16, with every product of the heads in bf16: q, k and v are
  // rounded once (one copy when packed) for the forward and backward products,
  // which read the copies, and their fp32 values can go once the forward is done.
  std::shared_ptr<std::vector<Bf16Copy>> copies;
  if (gemm_in_bf16(n.T_q, n.T_k, n.d_k) && gemm_in_bf16(n.T_q, n.d_v, n.T_k)) {
    copies = std::make_shared<std::vector<Bf16Copy>>();
    for (const Var& in : inputs) {
      const int64_t w = in.size(-1);
      copies->emplace_back(GemmOperand{in.value().data(), in.numel() / w, w, w});
    }
  }
  Tensor P = Tensor::uninitialized({n.B, n.h, n.T_q, n.T_k});  // attention weights
  Tensor out = Tensor::uninitialized(lo.interleaved ? Shape{n.B, n.T_q, n.h * n.d_v} : Shape{n.B, n.h, n.T_q, n.d_v});
  const Source qs = source(q.value(), copies.get(), 0), ks = source(k.value(), copies.get(), packed ? 0 : 1),
               vs = source(v.value(), copies.get(), packed ? 0 : 2);
  const Real* pad = mask.key_padding ? mask.key_padding->data() : nullptr;
  // Query i sees keys j <= i + shift (queries are the last T_q positions).
  const int64_t shift = n.T_k - n.T_q;

#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t bh = 0; bh < pairs; ++bh) {
    const int64_t b = bh / n.h, hh = bh % n.h;
    Real* S = P.data() + bh * n.T_q * n.T_k;  // (T_q, T_k): scores, then weights in place
    gemm({S, n.T_q, n.T_k, n.T_k}, head(qs, lq, b, hh), head(ks, lk, b, hh, true), scale, false);  // Q Kᵀ
    for (int64_t i = 0; i < n.T_q; ++i) {
      Real* row = S + i * n.T_k;
      if (mask.causal)
        for (int64_t j = std::max<int64_t>(i + shift + 1, 0); j < n.T_k; ++j) row[j] = kNegInf;
      if (pad)
        for (int64_t j = 0; j < n.T_k; ++j)
          if (pad[b * n.T_k + j] != 0) row[j] = kNegInf;
      softmax_row(row, row, n.T_k);  // masked -> exactly 0; fully masked row -> all 0
    }
    gemm(head_out(out.data(), lo, b, hh), square(S, n.T_q, n.T_k), head(vs, lv, b, hh), 1, false);  // O = P V
  }

  const bool record = grad_enabled() && any_requires_grad(inputs);
  if (weights_out) {
    if (record)
      *weights_out = P;  // backward still needs its own copy
    else
      *weights_out = std::move(P);
  }

  const ValueReads reads{false, copies ? 0u : ~0u};  // q, k, v (or their copies) and P, not the output
  return make_result(std::move(out), inputs, layouts.op, [n, lq, lk, lv, lo, packed, scale, parallel, P = std::move(P), copies](Node& self) {
    const size_t iq = 0, ik = packed ? 0 : 1, iv = packed ? 0 : 2;
    const bool need_q = self.input_needs_grad(iq), need_k = self.input_needs_grad(ik),
               need_v = self.input_needs_grad(iv);
    const Source qs = source(self.input_value(iq), copies.get(), iq), ks = source(self.input_value(ik), copies.get(), ik),
                 vs = source(self.input_value(iv), copies.get(), iv);
    const Real* dod = self.grad.data();
    // q, k and v may be one and the same Var; each (b, h) still writes only its
    // own slices, so the accumulations below never race. The buffers are taken
    // in the order each (b, h) writes them (dv, dq, dk): a fresh one is
    // overwritten by its first product, and an input seen again is not fresh.
    // Packed, the three write disjoint columns of one buffer: each overwrites
    // its own columns when that buffer is fresh.
    const GradTarget none{nullptr, false};
    const GradTarget gv = need_v ? self.input_grad_target(iv) : none;
    const GradTarget gq = packed ? gv : need_q ? self.input_grad_target(iq) : none;
    const GradTarget gk = packed ? gv : need_k ? self.input_grad_target(ik) : none;
    const int64_t pairs = n.B * n.h;

#pragma omp parallel if (parallel)
    {
      RowMatrix dS(n.T_q, n.T_k);  // per thread, reused across pairs
      Eigen::Matrix<Real, Eigen::Dynamic, 1> row_dot(n.T_q);
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < pairs; ++bh) {
        const int64_t b = bh / n.h, hh = bh % n.h;
        const Real* p = P.data() + bh * n.T_q * n.T_k;
        ConstMatMap Pm(p, n.T_q, n.T_k);
        if (need_v)  // dV = Pᵀ dO
          gemm(head_out(gv.grad->data(), lv, b, hh), square(p, n.T_q, n.T_k, true), head(dod, lo, b, hh), 1, !gv.fresh);
        if (!need_q && !need_k) continue;
        gemm({dS.data(), n.T_q, n.T_k, n.T_k}, head(dod, lo, b, hh), head(vs, lv, b, hh, true), 1, false);  // dP
        row_dot = (dS.array() * Pm.array()).rowwise().sum().matrix();
        dS = (Pm.array() * (dS.array().colwise() - row_dot.array())).matrix();
        if (need_q)  // dQ = dS K · scale
          gemm(head_out(gq.grad->data(), lq, b, hh), square(dS.data(), n.T_q, n.T_k), head(ks, lk, b, hh), scale,
               !gq.fresh);
        if (need_k)  // dK = dSᵀ Q · scale
          gemm(head_out(gk.grad->data(), lk, b, hh), square(dS.data(), n.T_q, n.T_k, true), head(qs, lq, b, hh),
               scale, !gk.fresh);
      }
    }
  }, reads);
}

// Second order: the kernel's composed form (framework/ops/composed.h), with
// its own copy of the mask. composed(inputs, mask) rebuilds the output.
template <class Composed>
Var with_second_order(Var r, const AttentionMask& mask, Composed composed) {
  if (!records_second_order(r)) return r;
  auto padding = std::make_shared<Tensor>(mask.key_padding ? *mask.key_padding : Tensor());
  const bool causal = mask.causal;
  r.node()->graph_backward = composed_graph_backward([padding, causal, composed](const std::vector<Var>& in) {
    return composed(in, AttentionMask{causal, padding->empty() ? nullptr : padding.get()});
  });
  return r;
}

}  // namespace

Var attention(const Var& q, const Var& k, const Var& v, Real scale, const AttentionMask& mask,
              Tensor* weights_out) {
  const Dims n = check_shapes(q, k, v, mask);
  return with_second_order(attention_core({q, k, v}, n, unpacked(n, false), scale, mask, weights_out), mask,
                           [scale](const std::vector<Var>& in, const AttentionMask& m) {
                             return composed_attention(in[0], in[1], in[2], scale, m);
                           });
}

Var attention_heads(const Var& q, const Var& k, const Var& v, int64_t n_heads, Real scale, const AttentionMask& mask,
                    Tensor* weights_out) {
  auto shapes = [&] {
    return "q " + q.value().shape_str() + ", k " + k.value().shape_str() + ", v " + v.value().shape_str();
  };
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3)
    throw ShapeError("attention_heads: q, k, v must be 3-d (B, T, h*d), got " + shapes());
  const Shape &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  if (n_heads < 1 || qs[2] % n_heads || vs[2] % n_heads)
    throw ShapeError("attention_heads: " + std::to_string(n_heads) + " heads do not divide the widths of " + shapes());
  if (qs[0] != ks[0] || qs[0] != vs[0]) throw ShapeError("attention_heads: batch dims differ: " + shapes());
  if (qs[2] != ks[2]) throw ShapeError("attention_heads: q and k must have the same width, got " + shapes());
  if (ks[1] != vs[1]) throw ShapeError("attention_heads: k and v must share T_k, got " + shapes());
  if (mask.key_padding && mask.key_padding->shape() != Shape{qs[0], ks[1]})
    throw ShapeError("attention_heads: key_padding must have shape " + shape_str({qs[0], ks[1]}) +
                     " (B, T_k), got " + mask.key_padding->shape_str());
  const Dims n{qs[0], n_heads, qs[1], ks[1], qs[2] / n_heads, vs[2] / n_heads};
  return with_second_order(attention_core({q, k, v}, n, unpacked(n, true), scale, mask, weights_out), mask,
                           [n_heads, scale](const std::vector<Var>& in, const AttentionMask& m) {
                             return composed_attention_heads(in[0], in[1], in[2], n_heads, scale, m);
                           });
}

Var attention_packed(const Var& qkv, int64_t n_heads, int64_t d_k, int64_t d_v, Real scale, const AttentionMask& mask,
                     Tensor* weights_out) {
  const int64_t width = n_heads * (2 * d_k + d_v);
  if (n_heads < 1 || d_k < 1 || d_v < 1)
    throw ShapeError("attention_packed: n_heads, d_k and d_v must be >= 1, got " + std::to_string(n_heads) + ", " +
                     std::to_string(d_k) + ", " + std::to_string(d_v));
  if (qkv.dim() != 3 || qkv.size(2) != width)
    throw ShapeError("attention_packed: qkv must be (B, T, h*(2*d_k + d_v)) = (B, T, " + std::to_string(width) +
                     "), got " + qkv.value().shape_str());
  const int64_t b = qkv.size(0), t = qkv.size(1);
  if (mask.key_padding && mask.key_padding->shape() != Shape{b, t})
    throw ShapeError("attention_packed: key_padding must have shape " + shape_str({b, t}) + " (B, T), got " +
                     mask.key_padding->shape_str());
  const Dims n{b, n_heads, t, t, d_k, d_v};
  Layouts l = unpacked(n, true);
  l.q.row = l.k.row = l.v.row = width;
  l.k.base = n_heads * d_k;
  l.v.base = 2 * n_heads * d_k;
  l.packed = true;
  l.op = "attention_packed";
  return with_second_order(attention_core({qkv}, n, l, scale, mask, weights_out), mask,
                           [n_heads, d_k, d_v, scale](const std::vector<Var>& in, const AttentionMask& m) {
                             return composed_attention_packed(in[0], n_heads, d_k, d_v, scale, m);
                           });
}

}  // namespace attnlab
