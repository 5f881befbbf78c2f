#pragma once
// The reference for MultiHeadAttention's fused projections (one product for
// self-attention's Q, K, V; one for cross-attention's K, V): the same layer
// computed the way it was before the fusion, with three separate linear ops.
// Compiled into the float32 tests (tests/test_fused_qkv.cpp) and the float64
// ones (tests/gradcheck/test_fused_qkv.cpp), which differ in the tolerance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/gradcheck.h"
#include "framework/nn/multi_head_attention.h"
#include "framework/ops/ops.h"
#include "framework/ops/rotary.h"

namespace attnlab::testing {

// One layer shape and call. Self-attention has T_k = T_q; d_k, d_v or
// kv_dim 0 take their defaults (d / h, d / h, d).
struct FusedCase {
  std::string name;
  bool cross;
  int64_t B, T_q, T_k, d, h, d_k, d_v, kv_dim;
  bool causal, padded, rope;
};

inline std::vector<FusedCase> fused_cases() {
  return {{"self", false, 2, 5, 5, 8, 2, 0, 0, 0, false, false, false},
          {"self causal with padding", false, 3, 4, 4, 12, 3, 0, 0, 0, true, true, false},
          {"self with d_k != d_v", false, 2, 3, 3, 8, 2, 3, 5, 0, false, true, false},
          {"self with rope", false, 2, 4, 4, 8, 2, 0, 0, 0, true, false, true},
          {"cross with kv_dim != d", true, 2, 3, 6, 8, 2, 0, 0, 6, false, true, false},
          {"cross with d_k != d_v", true, 1, 2, 5, 6, 3, 4, 1, 0, false, false, false}};
}

inline MultiHeadAttentionOptions fused_case_options(const FusedCase& c) {
  MultiHeadAttentionOptions o;
  o.d_model = c.d;
  o.n_heads = c.h;
  o.d_k = c.d_k;
  o.d_v = c.d_v;
  o.kv_dim = c.kv_dim;
  o.rope = c.rope;
  return o;
}

// m's forward(x, memory, causal, pad) computed with q_proj, k_proj and v_proj
// as three separate linear ops (memory undefined: self-attention).
inline Var unfused_attention(const MultiHeadAttention& m, const Var& x, const Var& memory, bool causal,
                             const Tensor* pad) {
  const Var& mem = memory.defined() ? memory : x;
  AttentionMask mask;
  mask.causal = causal;
  mask.key_padding = pad;
  Var q = m.q_proj->forward(x), k = m.k_proj->forward(mem), v = m.v_proj->forward(mem);  // (B, T, h·w)
  const int64_t b = x.size(0), h = m.n_heads();
  if (!m.options().rope) return m.out_proj->forward(attention_heads(q, k, v, h, m.scale(), mask));
  auto heads = [&](const Var& t, int64_t w) { return transpose(reshape(t, {b, t.size(1), h, w}), 1, 2); };
  Var ctx = attention(rotary(heads(q, m.d_k())), rotary(heads(k, m.d_k())), heads(v, m.d_v()), m.scale(), mask);
  return m.out_proj->forward(reshape(transpose(ctx, 1, 2), {b, x.size(1), h * m.d_v()}));  // (B, T_q, d)
}

// The worst |a − b| / max(1, |a|, |b|) over two tensors of one shape.
inline double worst_relative_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a[i], y = b[i];
    worst = std::max(worst, std::abs(x - y) / std::max({1.0, std::abs(x), std::abs(y)}));
  }
  return worst;
}

// Runs case c through the fused layer and the unfused reference with the same
// parameters and the same upstream gradient, and checks the outputs and the
// gradients of x, the memory and every parameter agree to `tolerance`
// (relative, as worst_relative_difference).
inline void check_fused_against_unfused(const FusedCase& c, double tolerance) {
  INFO("case: " << c.name);
  Rng init(7), drop(8), data(9);
  MultiHeadAttention m(fused_case_options(c), init, drop);
  const bool cross = c.cross;
  const int64_t kv = c.kv_dim > 0 ? c.kv_dim : c.d;
  const Tensor xv = uniform_tensor({c.B, c.T_q, c.d}, data), mv = uniform_tensor({c.B, c.T_k, kv}, data);
  const Tensor g = uniform_tensor({c.B, c.T_q, c.d}, data);
  Tensor pad({c.B, c.T_k});
  for (int64_t b = 0; b < c.B; ++b) pad[b * c.T_k + c.T_k - 1 - b % 2] = 1;  // one key of each row
  const Tensor* p = c.padded ? &pad : nullptr;

  struct Run {
    Tensor out, dx, dmem;
    std::vector<Tensor> dparams;
  };
  auto run = [&](bool fused) {
    m.zero_grad();
    Var x(xv, true), mem(mv, true);
    Var out = fused ? m.forward(x, cross ? mem : Var(), c.causal, p) : unfused_attention(m, x, cross ? mem : Var(), c.causal, p);
    backward(sum(mul(out, Var(g))));
    Run r{out.value(), x.grad(), cross ? mem.grad() : Tensor(), {}};
    for (const Var& param : m.parameters()) r.dparams.push_back(param.grad());
    return r;
  };
  const Run f = run(true), u = run(false);
  CHECK(worst_relative_difference(f.out, u.out) <= tolerance);
  CHECK(worst_relative_difference(f.dx, u.dx) <= tolerance);
  if (cross) CHECK(worst_relative_difference(f.dmem, u.dmem) <= tolerance);
  const auto named = m.named_parameters();
  REQUIRE(f.dparams.size() == named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    INFO("gradient of " << named[i].first);
    REQUIRE(f.dparams[i].shape() == named[i].second.shape());  // its own gradient, of its own shape
    CHECK(worst_relative_difference(f.dparams[i], u.dparams[i]) <= tolerance);
  }
}

}  // namespace attnlab::testing
