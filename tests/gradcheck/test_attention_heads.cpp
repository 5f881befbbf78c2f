// attention_heads (the kernel on the projections' interleaved layout) against
// its definition: split heads, attention(), merge heads. Float64 build.
#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;
using namespace attnlab::testing;

namespace {

// (B, T, h·w) -> (B, h, T, w) and back, from primitive ops.
Var split(const Var& x, int64_t h) {
  return transpose(reshape(x, {x.size(0), x.size(1), h, x.size(2) / h}), 1, 2);
}
Var merge(const Var& x) { return reshape(transpose(x, 1, 2), {x.size(0), x.size(2), x.size(1) * x.size(3)}); }

struct Case {
  int64_t B, h, T_q, T_k, d_k, d_v;
  bool causal, padded;
};

// Both sides compute the same sums in the same order per (b, h), so in float64
// they agree to rounding: 1e-12 relative.
bool close(const Tensor& a, const Tensor& b) {
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-12 * std::max({1.0, std::abs(a[i]), std::abs(b[i])})) return false;
  return a.shape() == b.shape();
}

}  // namespace

TEST_CASE("attention_heads equals split heads + attention + merge heads, values and gradients", "[attention][heads]") {
  // Both compute the same sums in the same order per (b, h), so in float64
  // they agree to rounding: 1e-12 relative.
  const Case cases[] = {{2, 3, 4, 4, 2, 3, false, false}, {1, 2, 3, 5, 4, 2, true, false},
                        {3, 1, 5, 5, 3, 3, true, true},   {2, 4, 1, 6, 2, 5, false, true}};
  for (const Case& c : cases) {
    Rng rng(11);
    Tensor pad({c.B, c.T_k});
    for (int64_t b = 0; b < c.B; ++b) pad[b * c.T_k + c.T_k - 1] = c.padded && b % 2 == 0 ? 1 : 0;
    AttentionMask mask;
    mask.causal = c.causal;
    mask.key_padding = c.padded ? &pad : nullptr;
    Tensor qv = random_tensor({c.B, c.T_q, c.h * c.d_k}, rng), kv = random_tensor({c.B, c.T_k, c.h * c.d_k}, rng),
           vv = random_tensor({c.B, c.T_k, c.h * c.d_v}, rng), gv = random_tensor({c.B, c.T_q, c.h * c.d_v}, rng);
    Var q1(qv, true), k1(kv, true), v1(vv, true), q2(qv, true), k2(kv, true), v2(vv, true);
    Tensor w1, w2;
    Var fused = attention_heads(q1, k1, v1, c.h, 0.7, mask, &w1);
    Var composed = merge(attention(split(q2, c.h), split(k2, c.h), split(v2, c.h), 0.7, mask, &w2));
    REQUIRE(fused.shape() == composed.shape());
    backward(sum(mul(fused, Var(gv))));
    backward(sum(mul(composed, Var(gv))));
    CHECK(close(fused.value(), composed.value()));
    CHECK(close(w1, w2));
    CHECK(close(q1.grad(), q2.grad()));
    CHECK(close(k1.grad(), k2.grad()));
    CHECK(close(v1.grad(), v2.grad()));
  }
}

TEST_CASE("attention_heads passes the gradient check with causal and padding masks", "[attention][heads]") {
  Rng rng(5);
  Tensor pad({2, 4});
  pad[3] = 1;
  pad[4 + 2] = 1;
  for (bool causal : {false, true}) {
    AttentionMask mask;
    mask.causal = causal;
    mask.key_padding = &pad;
    std::vector<Var> in{Var(random_tensor({2, 3, 2 * 3}, rng), true), Var(random_tensor({2, 4, 2 * 3}, rng), true),
                        Var(random_tensor({2, 4, 2 * 2}, rng), true)};
    auto fn = [&](const std::vector<Var>& x) { return attention_heads(x[0], x[1], x[2], 2, 0.5, mask); };
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck(fn, in));
  }
}

TEST_CASE("attention_heads names the shapes that do not fit", "[attention][heads]") {
  Var q(Tensor({2, 3, 6})), k(Tensor({2, 4, 6})), v(Tensor({2, 5, 6}));
  REQUIRE_THROWS_WITH(attention_heads(q, k, v, 2, 1.0), Catch::Contains("(2, 4, 6)") && Catch::Contains("(2, 5, 6)"));
  REQUIRE_THROWS_WITH(attention_heads(q, k, k, 4, 1.0), Catch::Contains("4 heads"));
}

// attention_packed reads the fused Q/K/V product in place; its definition is
// attention_heads on the product's three column blocks.
TEST_CASE("attention_packed equals attention_heads on the split Q, K, V blocks, values, weights and gradients",
          "[attention][heads]") {
  struct PackedCase {
    int64_t B, h, T, d_k, d_v;
    bool causal, padded, reused;  // reused: qkv also feeds another op, so its gradient is accumulated into
  };
  const PackedCase cases[] = {{2, 3, 4, 2, 3, false, false, false}, {1, 2, 5, 4, 2, true, false, false},
                              {3, 1, 5, 3, 3, true, true, false},   {2, 4, 6, 2, 5, false, true, true},
                              {2, 2, 3, 3, 1, true, false, true}};
  for (const PackedCase& c : cases) {
    INFO("B " << c.B << " h " << c.h << " T " << c.T << " d_k " << c.d_k << " d_v " << c.d_v);
    Rng rng(17);
    Tensor pad({c.B, c.T});
    for (int64_t b = 0; b < c.B; ++b) pad[b * c.T + c.T - 1] = c.padded && b % 2 == 0 ? 1 : 0;
    AttentionMask mask;
    mask.causal = c.causal;
    mask.key_padding = c.padded ? &pad : nullptr;
    const int64_t wk = c.h * c.d_k, wv = c.h * c.d_v;
    Tensor x = random_tensor({c.B, c.T, 2 * wk + wv}, rng), g = random_tensor({c.B, c.T, wv}, rng),
           other = random_tensor({c.B, c.T, 2 * wk + wv}, rng);
    Var p1(x, true), p2(x, true);
    Tensor w1, w2;
    Var packed = attention_packed(p1, c.h, c.d_k, c.d_v, 0.6, mask, &w1);
    std::vector<Var> parts = split(p2, -1, {wk, wk, wv});
    Var composed = attention_heads(parts[0], parts[1], parts[2], c.h, 0.6, mask, &w2);
    REQUIRE(packed.shape() == composed.shape());
    Var l1 = sum(mul(packed, Var(g))), l2 = sum(mul(composed, Var(g)));
    if (c.reused) {
      l1 = add(l1, sum(mul(p1, Var(other))));
      l2 = add(l2, sum(mul(p2, Var(other))));
    }
    backward(l1);
    backward(l2);
    CHECK(close(packed.value(), composed.value()));
    CHECK(close(w1, w2));
    CHECK(close(p1.grad(), p2.grad()));
  }
}

TEST_CASE("attention_packed passes the gradient check with causal and padding masks", "[attention][heads]") {
  Rng rng(9);
  Tensor pad({2, 4});
  pad[3] = 1;
  pad[4 + 2] = 1;
  for (bool causal : {false, true}) {
    AttentionMask mask;
    mask.causal = causal;
    mask.key_padding = &pad;
    std::vector<Var> in{Var(random_tensor({2, 4, 2 * (2 * 3 + 2)}, rng), true)};
    auto fn = [&](const std::vector<Var>& x) { return attention_packed(x[0], 2, 3, 2, 0.5, mask); };
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck(fn, in));
  }
}

TEST_CASE("attention_packed names the shapes that do not fit", "[attention][heads]") {
  Var qkv(Tensor({2, 3, 14}));
  REQUIRE_THROWS_WITH(attention_packed(qkv, 2, 3, 2, 1.0), Catch::Contains("(B, T, 16)") && Catch::Contains("(2, 3, 14)"));
  REQUIRE_THROWS_WITH(attention_packed(qkv, 2, 0, 2, 1.0), Catch::Contains("d_k and d_v must be >= 1"));
  Tensor pad({2, 4});
  AttentionMask mask;
  mask.key_padding = &pad;
  REQUIRE_THROWS_WITH(attention_packed(Var(Tensor({2, 3, 16})), 2, 3, 2, 1.0, mask), Catch::Contains("(2, 3) (B, T)"));
}
