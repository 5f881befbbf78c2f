// The fused attention core, forward and backward, one (batch, head) pair per
// task. Forward caches the attention weights P (B, h, T_q, T_k); backward is
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),
//   dQ = dS K · scale,  dK = dSᵀ Q · scale.
#include "framework/ops/attention.h"

#include <algorithm>
#include <limits>
#include <string>

#include "framework/ops/softmax.h"

namespace attnlab {
namespace {

constexpr Real kNegInf = -std::numeric_limits<Real>::infinity();

// One (b, h) pair costs ~T_q·T_k·(d_k + d_v) multiply-adds; below this much
// work in total a thread team costs more than it saves.
constexpr int64_t kParallelMinFlops = 1 << 16;

struct Dims {
  int64_t B, h, T_q, T_k, d_k, d_v;
};

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

}  // namespace

Var attention(const Var& q, const Var& k, const Var& v, Real scale, const AttentionMask& mask,
              Tensor* weights_out) {
  const Dims n = check_shapes(q, k, v, mask);
  const int64_t pairs = n.B * n.h;
  const bool parallel = pairs > 1 && pairs * n.T_q * n.T_k * (n.d_k + n.d_v) >= kParallelMinFlops;

  Tensor P({n.B, n.h, n.T_q, n.T_k});  // attention weights
  Tensor out({n.B, n.h, n.T_q, n.d_v});
  const Real* qd = q.value().data();
  const Real* kd = k.value().data();
  const Real* vd = v.value().data();
  const Real* pad = mask.key_padding ? mask.key_padding->data() : nullptr;
  // Query i sees keys j <= i + shift (queries are the last T_q positions).
  const int64_t shift = n.T_k - n.T_q;

#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t bh = 0; bh < pairs; ++bh) {
    const int64_t b = bh / n.h;
    ConstMatMap Q(qd + bh * n.T_q * n.d_k, n.T_q, n.d_k);  // (T_q, d_k)
    ConstMatMap K(kd + bh * n.T_k * n.d_k, n.T_k, n.d_k);  // (T_k, d_k)
    ConstMatMap Vm(vd + bh * n.T_k * n.d_v, n.T_k, n.d_v);  // (T_k, d_v)
    MatMap S(P.data() + bh * n.T_q * n.T_k, n.T_q, n.T_k);  // scores, then weights in place
    MatMap O(out.data() + bh * n.T_q * n.d_v, n.T_q, n.d_v);
    S.noalias() = scale * Q * K.transpose();
    for (int64_t i = 0; i < n.T_q; ++i) {
      Real* row = S.data() + i * n.T_k;
      if (mask.causal)
        for (int64_t j = std::max<int64_t>(i + shift + 1, 0); j < n.T_k; ++j) row[j] = kNegInf;
      if (pad)
        for (int64_t j = 0; j < n.T_k; ++j)
          if (pad[b * n.T_k + j] != 0) row[j] = kNegInf;
      softmax_row(row, row, n.T_k);  // masked -> exactly 0; fully masked row -> all 0
    }
    O.noalias() = S * Vm;
  }

  const bool record = grad_enabled() && any_requires_grad({q, k, v});
  if (weights_out) {
    if (record)
      *weights_out = P;  // backward still needs its own copy
    else
      *weights_out = std::move(P);
  }

  return make_result(std::move(out), {q, k, v}, "attention", [n, scale, parallel, P = std::move(P)](Node& self) {
    const bool need_q = self.input_needs_grad(0), need_k = self.input_needs_grad(1),
               need_v = self.input_needs_grad(2);
    const Real* qd = self.input_value(0).data();
    const Real* kd = self.input_value(1).data();
    const Real* vd = self.input_value(2).data();
    const Real* dod = self.grad.data();
    // q, k and v may be one and the same Var; each (b, h) still writes only its
    // own slices, so the accumulations below never race.
    Real* dq = need_q ? self.input_grad(0).data() : nullptr;
    Real* dk = need_k ? self.input_grad(1).data() : nullptr;
    Real* dv = need_v ? self.input_grad(2).data() : nullptr;
    const int64_t pairs = n.B * n.h;

#pragma omp parallel if (parallel)
    {
      RowMatrix dS(n.T_q, n.T_k);  // per thread, reused across pairs
      Eigen::Matrix<Real, Eigen::Dynamic, 1> row_dot(n.T_q);
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < pairs; ++bh) {
        ConstMatMap Pm(P.data() + bh * n.T_q * n.T_k, n.T_q, n.T_k);
        ConstMatMap dO(dod + bh * n.T_q * n.d_v, n.T_q, n.d_v);
        ConstMatMap Vm(vd + bh * n.T_k * n.d_v, n.T_k, n.d_v);
        if (need_v) MatMap(dv + bh * n.T_k * n.d_v, n.T_k, n.d_v).noalias() += Pm.transpose() * dO;
        if (!need_q && !need_k) continue;
        dS.noalias() = dO * Vm.transpose();  // dP
        row_dot = (dS.array() * Pm.array()).rowwise().sum().matrix();
        dS = (Pm.array() * (dS.array().colwise() - row_dot.array())).matrix();
        if (need_q) {
          ConstMatMap K(kd + bh * n.T_k * n.d_k, n.T_k, n.d_k);
          MatMap(dq + bh * n.T_q * n.d_k, n.T_q, n.d_k).noalias() += scale * dS * K;
        }
        if (need_k) {
          ConstMatMap Q(qd + bh * n.T_q * n.d_k, n.T_q, n.d_k);
          MatMap(dk + bh * n.T_k * n.d_k, n.T_k, n.d_k).noalias() += scale * dS.transpose() * Q;
        }
      }
    }
  });
}

}  // namespace attnlab
