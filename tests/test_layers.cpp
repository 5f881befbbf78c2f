// The layers in float32: initialisation, values, masks, names, modes, errors.
// (Their gradients are checked in float64 in tests/gradcheck/test_layers.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "framework/nn/nn.h"
#include "framework/ops/ops.h"
#include "framework/ops/rotary.h"
#include "tests/pattern_recorder.h"

using namespace attnlab;

namespace {

Tensor random_tensor(Shape shape, Rng& rng) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(-1, 1));
  return t;
}

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, var] : m.named_parameters()) names.push_back(name);
  return names;
}

MultiHeadAttentionOptions mha_options(int64_t d, int64_t h) {
  MultiHeadAttentionOptions o;
  o.d_model = d;
  o.n_heads = h;
  return o;
}

}  // namespace

// ---- initialisation ----------------------------------------------------------

TEST_CASE("Linear draws weight then bias from U(-1/sqrt(in), 1/sqrt(in)) in row-major order", "[layers][init]") {
  Rng init(7);
  Linear fc(16, 5, init);
  REQUIRE(fc.weight.shape() == Shape{5, 16});
  REQUIRE(fc.bias.shape() == Shape{5});
  // Replaying the documented draw order on the same seed gives the same values
  // (float32 rounding of the same double: exact).
  Rng replay(7);
  for (int64_t i = 0; i < fc.weight.numel(); ++i)
    REQUIRE(fc.weight.value()[i] == static_cast<Real>(replay.uniform(-0.25, 0.25)));
  for (int64_t i = 0; i < fc.bias.numel(); ++i)
    REQUIRE(fc.bias.value()[i] == static_cast<Real>(replay.uniform(-0.25, 0.25)));
  // The init consumed exactly those draws: the next one continues the stream.
  REQUIRE(init.next_u64() == replay.next_u64());
}

TEST_CASE("Linear without bias has only a weight", "[layers][init]") {
  Rng init(1);
  Linear fc(3, 2, init, false);
  REQUIRE_FALSE(fc.bias.defined());
  REQUIRE(names_of(fc) == std::vector<std::string>{"weight"});
  REQUIRE(fc.parameter_count() == 6);
}

TEST_CASE("Embedding draws N(0, 1) and LearnedPositional N(0, 0.02^2), row by row", "[layers][init]") {
  Rng init(3);
  Embedding emb(100, 100, init);
  Rng replay(3);
  for (int64_t i = 0; i < emb.weight.numel(); ++i)
    REQUIRE(emb.weight.value()[i] == static_cast<Real>(replay.normal(0.0, 1.0)));
  // The sample of 10^4 has the stated moments: the standard error of the mean
  // is 0.01 and of the standard deviation ~0.007, so 0.05 is 5+ sigma.
  double mean = 0, sq = 0;
  for (int64_t i = 0; i < emb.weight.numel(); ++i) {
    mean += emb.weight.value()[i];
    sq += double(emb.weight.value()[i]) * emb.weight.value()[i];
  }
  mean /= 1e4;
  REQUIRE(std::abs(mean) < 0.05);
  REQUIRE(std::abs(std::sqrt(sq / 1e4 - mean * mean) - 1.0) < 0.05);

  Rng init2(4), replay2(4);
  LearnedPositional pos(50, 8, init2);
  for (int64_t i = 0; i < pos.weight.numel(); ++i)
    REQUIRE(pos.weight.value()[i] == static_cast<Real>(replay2.normal(0.0, 0.02)));
}

TEST_CASE("LayerNorm starts as weight ones, bias zeros and normalises rows", "[layers][init]") {
  LayerNorm ln(5);
  for (int64_t i = 0; i < 5; ++i) {
    REQUIRE(ln.weight.value()[i] == 1);
    REQUIRE(ln.bias.value()[i] == 0);
  }
  Rng data(1);
  Tensor x = random_tensor({3, 5}, data);
  Var y = ln.forward(Var(x));
  for (int64_t r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < 5; ++c) m += y.value()[r * 5 + c];
    m /= 5;
    for (int64_t c = 0; c < 5; ++c) v += (y.value()[r * 5 + c] - m) * (y.value()[r * 5 + c] - m);
    v /= 5;
    // float32 rounding ~1e-7 per op; eps = 1e-5 shrinks the variance by ~eps/var < 1e-4.
    REQUIRE(std::abs(m) < 1e-5);
    REQUIRE(v == Approx(1).epsilon(1e-3));
  }
}

TEST_CASE("the same seed builds the same attention layer", "[layers][init]") {
  Rng a(9), b(9), da(1), db(1);
  MultiHeadAttention m1(mha_options(8, 2), a, da), m2(mha_options(8, 2), b, db);
  auto p1 = m1.parameters(), p2 = m2.parameters();
  REQUIRE(p1.size() == p2.size());
  for (size_t i = 0; i < p1.size(); ++i)
    for (int64_t j = 0; j < p1[i].numel(); ++j) REQUIRE(p1[i].value()[j] == p2[i].value()[j]);
}

// ---- values ----------------------------------------------------------------

TEST_CASE("Linear computes x W^T + b", "[layers]") {
  Rng init(1);
  Linear fc(2, 3, init);
  fc.weight.value() = Tensor::from({3, 2}, {1, 2, 3, 4, 5, 6});
  fc.bias.value() = Tensor::from({3}, {0.5, -1, 2});
  Var y = fc.forward(Var(Tensor::from({1, 2}, {1, -1})));
  REQUIRE(y.shape() == Shape{1, 3});
  REQUIRE(y.value()[0] == Approx(1 - 2 + 0.5));
  REQUIRE(y.value()[1] == Approx(3 - 4 - 1));
  REQUIRE(y.value()[2] == Approx(5 - 6 + 2));
  REQUIRE_THROWS_WITH(fc.forward(Var(Tensor({4, 3}))), Catch::Contains("(4, 3)") && Catch::Contains("in = 2"));
}

TEST_CASE("sinusoidal table matches sin/cos of p / 10000^(2i/d)", "[layers][positional]") {
  Tensor pe = sinusoidal_table(10, 8);
  REQUIRE(pe.shape() == Shape{10, 8});
  // Position 0: sin 0 = 0 on even channels, cos 0 = 1 on odd ones.
  for (int64_t c = 0; c < 8; ++c) REQUIRE(pe[c] == (c % 2 == 0 ? 0 : 1));
  // Position 3, d = 8: pair i = 0 has angle 3, pair i = 2 has angle 3 / 10000^(4/8) = 0.03.
  // Reference values written out independently; float32 resolution ~1e-7.
  REQUIRE(pe[3 * 8 + 0] == Approx(0.1411200081).margin(1e-6));
  REQUIRE(pe[3 * 8 + 1] == Approx(-0.9899924966).margin(1e-6));
  REQUIRE(pe[3 * 8 + 4] == Approx(0.0299955002).margin(1e-6));
  REQUIRE(pe[3 * 8 + 5] == Approx(0.9995500337).margin(1e-6));
  // Position 7, pair i = 3: angle 7 / 10000^(6/8) = 0.007.
  REQUIRE(pe[7 * 8 + 6] == Approx(0.0069999428).margin(1e-6));
  REQUIRE(pe[7 * 8 + 7] == Approx(0.9999755001).margin(1e-6));
  // Odd width: the last channel is the sine of an incomplete pair.
  Tensor odd = sinusoidal_table(4, 5);
  REQUIRE(odd[2 * 5 + 4] == Approx(std::sin(2.0 / std::pow(10000.0, 4.0 / 5.0))).margin(1e-6));
  REQUIRE_THROWS_AS(sinusoidal_table(0, 4), ValueError);
}

TEST_CASE("positional modules return the rows of their window and refuse to run past max_len", "[layers][positional]") {
  SinusoidalPositional sin_pos(6, 4);
  REQUIRE(sin_pos.parameters().empty());
  Var rows = sin_pos.forward(3, 2);
  REQUIRE(rows.shape() == Shape{3, 4});
  for (int64_t i = 0; i < 12; ++i) REQUIRE(rows.value()[i] == sin_pos.table()[2 * 4 + i]);
  REQUIRE_THROWS_WITH(sin_pos.forward(5, 2), Catch::Contains("[2, 7)") && Catch::Contains("max_len = 6"));

  Rng init(1);
  LearnedPositional pos(6, 4, init);
  Var learned = pos.forward(2, 4);
  for (int64_t i = 0; i < 8; ++i) REQUIRE(learned.value()[i] == pos.weight.value()[4 * 4 + i]);
  REQUIRE_THROWS_AS(pos.forward(3, 4), ValueError);
}

TEST_CASE("Dropout is the identity in eval mode and inverted dropout in training", "[layers][dropout]") {
  Rng drop(5), data(6);
  Dropout dropout(0.5, drop);
  Var x(random_tensor({1000}, data));
  dropout.eval();
  Var same = dropout.forward(x);
  for (int64_t i = 0; i < x.numel(); ++i) REQUIRE(same.value()[i] == x.value()[i]);
  dropout.train();
  Var y = dropout.forward(x);
  int64_t zeros = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (y.value()[i] == 0) {
      ++zeros;
    } else {
      REQUIRE(y.value()[i] == Approx(2 * x.value()[i]));  // kept values scaled by 1/(1-p)
    }
  }
  // Binomial(1000, 0.5): standard deviation ~16, so [400, 600] is 6 sigma.
  REQUIRE(zeros > 400);
  REQUIRE(zeros < 600);
  REQUIRE_THROWS_WITH(Dropout(1.0, drop), Catch::Contains("1.0"));
  REQUIRE_THROWS_AS(Dropout(-0.1, drop), ValueError);
}

TEST_CASE("FeedForward: names, count, activation parsing and eval-mode determinism", "[layers][ff]") {
  REQUIRE(parse_choice<Activation>("activation", "relu") == Activation::relu);
  REQUIRE(parse_choice<Activation>("activation", "gelu") == Activation::gelu);
  REQUIRE_THROWS_WITH(parse_choice<Activation>("activation", "swish"),
                      "activation must be one of 'gelu', 'relu', got 'swish'");
  REQUIRE(name_of(Activation::gelu) == "gelu");

  Rng init(2), drop(3), data(4);
  FeedForward ff(4, 10, Activation::relu, 0.5, init, drop);
  REQUIRE(names_of(ff) == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  REQUIRE(ff.parameter_count() == 4 * 10 + 10 + 10 * 4 + 4);
  Var x(random_tensor({3, 4}, data));
  ff.eval();
  REQUIRE_FALSE(ff.dropout->training());
  Var a = ff.forward(x), b = ff.forward(x);
  for (int64_t i = 0; i < a.numel(); ++i) REQUIRE(a.value()[i] == b.value()[i]);
  // fc2(relu(fc1 x)) by hand, no dropout in eval.
  Var ref = ff.fc2->forward(relu(ff.fc1->forward(x)));
  for (int64_t i = 0; i < a.numel(); ++i) REQUIRE(a.value()[i] == Approx(ref.value()[i]));
}

// ---- rotary ------------------------------------------------------------------

TEST_CASE("rotary is the identity at position 0 and preserves every pair's norm", "[rotary]") {
  Rng data(1);
  Tensor x = random_tensor({2, 3, 6, 8}, data);
  Var y = rotary(Var(x));
  REQUIRE(y.shape() == x.shape());
  for (int64_t row = 0; row < 2 * 3 * 6; ++row) {
    const int64_t t = row % 6;
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t a = row * 8 + 2 * i, b = a + 1;
      if (t == 0) {
        REQUIRE(y.value()[a] == x[a]);  // cos 0 = 1, sin 0 = 0: exact
        REQUIRE(y.value()[b] == x[b]);
      }
      // float32: each value carries ~1e-7 relative rounding.
      const double before = std::hypot(x[a], x[b]), after = std::hypot(y.value()[a], y.value()[b]);
      REQUIRE(after == Approx(before).epsilon(1e-5));
    }
  }
}

TEST_CASE("rotary_heads on (B, T, h*d_k) equals rotary on the (B, h, T, d_k) split, bit for bit, and so do their "
          "gradients", "[rotary]") {
  Rng data(3);
  const int64_t b = 2, t = 5, h = 3, d_k = 4;
  Tensor x = random_tensor({b, t, h * d_k}, data), seed = random_tensor({b, t, h * d_k}, data);
  Var joined(x, true), split_in(x, true);
  Var y = rotary_heads(joined, h, /*offset=*/2, /*base=*/50);
  Var z = transpose(rotary(transpose(reshape(split_in, {b, t, h, d_k}), 1, 2), 2, 50), 1, 2);  // (B, T, h, d_k)
  for (int64_t i = 0; i < x.numel(); ++i) REQUIRE(y.value()[i] == z.value()[i]);
  backward(sum(mul(y, Var(seed))));
  backward(sum(mul(reshape(z, {b, t, h * d_k}), Var(seed))));
  for (int64_t i = 0; i < x.numel(); ++i) REQUIRE(joined.grad()[i] == split_in.grad()[i]);
  CHECK_THROWS_AS(rotary_heads(joined, 5), ShapeError);           // 5 heads do not divide 12
  CHECK_THROWS_AS(rotary_heads(Var(Tensor({1, 2, 6})), 2), ValueError);  // d_k = 3 is odd
}

TEST_CASE("rotary turns pair i at position p by p * base^(-2i/d_k)", "[rotary]") {
  Var x(Tensor::from({1, 1, 4}, {1, 0, 0, 1}));  // (h = 1, T = 1, d_k = 4)
  Var y = rotary(x, /*offset=*/5, /*base=*/100);
  // pair 0: angle 5 on (1, 0) -> (cos 5, sin 5); pair 1: angle 5/10 = 0.5 on (0, 1) -> (-sin 0.5, cos 0.5).
  REQUIRE(y.value()[0] == Approx(std::cos(5.0)).margin(1e-6));
  REQUIRE(y.value()[1] == Approx(std::sin(5.0)).margin(1e-6));
  REQUIRE(y.value()[2] == Approx(-std::sin(0.5)).margin(1e-6));
  REQUIRE(y.value()[3] == Approx(std::cos(0.5)).margin(1e-6));
}

TEST_CASE("after rotary, q . k depends only on the relative position", "[rotary]") {
  Rng data(2);
  Tensor q = random_tensor({1, 8}, data), k = random_tensor({1, 8}, data);
  auto dot_at = [&](int64_t p_q, int64_t p_k) {
    Var rq = rotary(Var(q), p_q), rk = rotary(Var(k), p_k);
    double s = 0;
    for (int64_t i = 0; i < 8; ++i) s += double(rq.value()[i]) * rk.value()[i];
    return s;
  };
  // Same offset 3 at positions (3, 0), (10, 7), (40, 37): float32 angles ~1e-6.
  REQUIRE(dot_at(10, 7) == Approx(dot_at(3, 0)).margin(1e-4));
  REQUIRE(dot_at(40, 37) == Approx(dot_at(3, 0)).margin(1e-4));
  // and it does depend on the offset (so the check above can fail).
  REQUIRE(std::abs(dot_at(5, 0) - dot_at(3, 0)) > 1e-3);
}

TEST_CASE("rotary rejects an odd d_k naming it", "[rotary]") {
  REQUIRE_THROWS_WITH(rotary(Var(Tensor({1, 2, 5}))), Catch::Contains("d_k = 5"));
  REQUIRE_THROWS_AS(rotary(Var(Tensor({4}))), ShapeError);
}

// ---- attention ----------------------------------------------------------------

TEST_CASE("attention scales parse, evaluate and print back", "[attention]") {
  REQUIRE(parse_attention_scale("sqrt").value(16) == Approx(0.25));
  REQUIRE(parse_attention_scale("none").value(16) == 1);
  REQUIRE(parse_attention_scale("linear").value(16) == Approx(1.0 / 16));
  REQUIRE(parse_attention_scale("0.3").value(16) == Approx(0.3));
  REQUIRE(AttentionScale{}.value(4) == Approx(0.5));  // default: 1/sqrt(d_k)
  for (const char* text : {"sqrt", "none", "linear", "0.3"})
    REQUIRE(parse_attention_scale(parse_attention_scale(text).str()).value(9) == Approx(parse_attention_scale(text).value(9)));
  for (const char* bad : {"", "sqr", "-1", "0", "2x", "inf"}) {
    INFO(bad);
    REQUIRE_THROWS_AS(parse_attention_scale(bad), ValueError);
  }
  REQUIRE_THROWS_WITH(parse_attention_scale("cubic"), Catch::Contains("'cubic'"));
}

TEST_CASE("MultiHeadAttention parameter names, shapes and count", "[attention]") {
  Rng init(1), drop(2);
  MultiHeadAttention mha(mha_options(8, 2), init, drop);
  REQUIRE(names_of(mha) == std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                                                    "v_proj.weight", "v_proj.bias", "out_proj.weight",
                                                    "out_proj.bias"});
  REQUIRE(mha.parameter_count() == 4 * (8 * 8 + 8));
  REQUIRE(mha.d_k() == 4);
  REQUIRE(mha.scale() == Approx(0.5));

  MultiHeadAttentionOptions o = mha_options(8, 2);
  o.d_k = 3;
  o.d_v = 5;
  o.kv_dim = 6;
  MultiHeadAttention cross(o, init, drop);
  REQUIRE(cross.parameter("q_proj.weight").shape() == Shape{6, 8});
  REQUIRE(cross.parameter("k_proj.weight").shape() == Shape{6, 6});
  REQUIRE(cross.parameter("v_proj.weight").shape() == Shape{10, 6});
  REQUIRE(cross.parameter("out_proj.weight").shape() == Shape{8, 10});
  REQUIRE(cross.parameter_count() == (8 * 6 + 6) + (6 * 6 + 6) + (6 * 10 + 10) + (10 * 8 + 8));
  Rng data(3);
  Var y = cross.forward(Var(random_tensor({2, 3, 8}, data)), Var(random_tensor({2, 5, 6}, data)));
  REQUIRE(y.shape() == Shape{2, 3, 8});
}

TEST_CASE("every head's attention weights sum to 1 over the keys, masked keys get exactly 0", "[attention]") {
  Rng init(4), drop(5), data(6);
  MultiHeadAttention mha(mha_options(8, 4), init, drop);
  PatternRecorder recorder(mha);
  const int64_t B = 2, h = 4, T = 5;
  Var x(random_tensor({B, T, 8}, data));
  Tensor pad = Tensor::from({B, T}, {0, 0, 0, 0, 1, 0, 0, 1, 1, 1});
  for (bool causal : {false, true}) {
    for (const Tensor* padding : {static_cast<const Tensor*>(nullptr), static_cast<const Tensor*>(&pad)}) {
      INFO("causal " << causal << ", padding " << (padding != nullptr));
      mha.forward(x, Var(), causal, padding);
      const Tensor& w = recorder.weights;
      REQUIRE(w.shape() == Shape{B, h, T, T});
      for (int64_t b = 0; b < B; ++b)
        for (int64_t head = 0; head < h; ++head)
          for (int64_t i = 0; i < T; ++i) {
            double total = 0;
            for (int64_t j = 0; j < T; ++j) {
              const Real wij = w[((b * h + head) * T + i) * T + j];
              const bool masked = (causal && j > i) || (padding && pad[b * T + j] != 0);
              if (masked) REQUIRE(wij == 0);
              REQUIRE(wij >= 0);
              total += wij;
            }
            // Every query row keeps at least key 0 here. float32 sum of 5 terms: ~1e-6.
            REQUIRE(total == Approx(1).margin(1e-5));
          }
    }
  }
}

TEST_CASE("cross-attention weights are (B, h, T_q, T_k), a removed observer keeps the last recorded", "[attention]") {
  Rng init(7), drop(8), data(9);
  MultiHeadAttentionOptions o = mha_options(6, 3);
  o.kv_dim = 4;
  MultiHeadAttention mha(o, init, drop);
  PatternRecorder recorder(mha);
  REQUIRE(recorder.weights.numel() == 0);
  Var x(random_tensor({2, 3, 6}, data)), memory(random_tensor({2, 7, 4}, data));
  mha.forward(x, memory);
  REQUIRE(recorder.weights.shape() == Shape{2, 3, 3, 7});
  Tensor kept = recorder.weights;
  recorder.stop();
  mha.forward(Var(random_tensor({2, 3, 6}, data)), memory);
  for (int64_t i = 0; i < kept.numel(); ++i) REQUIRE(recorder.weights[i] == kept[i]);
}

TEST_CASE("parameter-free attention averages the inputs with softmax(x_i . x_j * s) weights", "[attention]") {
  Rng init(1), drop(2), data(3);
  MultiHeadAttentionOptions o = mha_options(4, 2);  // n_heads is ignored: one head over the width
  o.projections = false;
  MultiHeadAttention mha(o, init, drop);
  REQUIRE(mha.parameter_count() == 0);
  REQUIRE(mha.n_heads() == 1);
  const int64_t T = 3, d = 4;
  Tensor x = random_tensor({1, T, d}, data);
  Var y = mha.forward(Var(x));
  REQUIRE(y.shape() == Shape{1, T, d});
  for (int64_t i = 0; i < T; ++i) {
    // Reference in double: s = 1/sqrt(4) = 0.5.
    double logits[T], z = 0;
    for (int64_t j = 0; j < T; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += double(x[i * d + c]) * x[j * d + c];
      logits[j] = std::exp(0.5 * dot);
      z += logits[j];
    }
    for (int64_t c = 0; c < d; ++c) {
      double expect = 0;
      for (int64_t j = 0; j < T; ++j) expect += logits[j] / z * x[j * d + c];
      REQUIRE(y.value()[i * d + c] == Approx(expect).margin(1e-5));  // float32 vs double
    }
  }
}

TEST_CASE("the composed attention core matches the fused op in values and gradients", "[attention]") {
  Rng data(11);
  const int64_t B = 2, h = 2, Tq = 4, Tk = 4, dk = 3, dv = 5;
  Tensor pad = Tensor::from({B, Tk}, {0, 0, 0, 1, 1, 0, 0, 0});
  AttentionMask mask;
  mask.causal = true;
  mask.key_padding = &pad;  // batch 1, query 0 sees only the padded key 0: a fully masked row
  Tensor qv = random_tensor({B, h, Tq, dk}, data), kv = random_tensor({B, h, Tk, dk}, data),
         vv = random_tensor({B, h, Tk, dv}, data), proj = random_tensor({B, h, Tq, dv}, data);
  Var q1(qv, true), k1(kv, true), v1(vv, true), q2(qv, true), k2(kv, true), v2(vv, true);
  Tensor w1, w2;
  Var fused = attention(q1, k1, v1, 0.7, mask, &w1);
  Var composed = composed_attention(q2, k2, v2, 0.7, mask, 0, nullptr, false, &w2, nullptr);
  // float32 with different summation orders: agreement to ~1e-6; 1e-5 leaves room.
  for (int64_t i = 0; i < fused.numel(); ++i) REQUIRE(fused.value()[i] == Approx(composed.value()[i]).margin(1e-5));
  for (int64_t i = 0; i < w1.numel(); ++i) REQUIRE(w1[i] == Approx(w2[i]).margin(1e-5));
  backward(sum(mul(fused, Var(proj))));
  backward(sum(mul(composed, Var(proj))));
  for (auto [a, b] : std::initializer_list<std::pair<Var*, Var*>>{{&q1, &q2}, {&k1, &k2}, {&v1, &v2}})
    for (int64_t i = 0; i < a->numel(); ++i) REQUIRE(a->grad()[i] == Approx(b->grad()[i]).margin(1e-5));
}

TEST_CASE("attention dropout acts in training only", "[attention][dropout]") {
  Rng init_a(3), init_b(3), drop_a(4), drop_b(4), data(5);
  MultiHeadAttentionOptions o = mha_options(8, 2);
  MultiHeadAttention plain(o, init_a, drop_a);
  o.dropout = 0.5;
  MultiHeadAttention dropped(o, init_b, drop_b);  // same init seed: same parameters
  Var x(random_tensor({2, 4, 8}, data));
  Var reference = plain.forward(x);
  dropped.eval();
  Var in_eval = dropped.forward(x);
  for (int64_t i = 0; i < reference.numel(); ++i) REQUIRE(in_eval.value()[i] == Approx(reference.value()[i]));
  dropped.train();
  PatternRecorder recorder(dropped);
  Var in_training = dropped.forward(x);
  double diff = 0;
  for (int64_t i = 0; i < reference.numel(); ++i) diff += std::abs(in_training.value()[i] - reference.value()[i]);
  REQUIRE(diff > 1e-3);
  // The captured weights are those before dropout: rows still sum to 1.
  const Tensor& w = recorder.weights;
  for (int64_t row = 0; row < w.numel() / 4; ++row) {
    double total = 0;
    for (int64_t j = 0; j < 4; ++j) total += w[row * 4 + j];
    REQUIRE(total == Approx(1).margin(1e-5));
  }
}

TEST_CASE("inconsistent attention sizes throw errors naming the values", "[attention][errors]") {
  Rng init(1), drop(2), data(3);
  SECTION("h not dividing d without explicit d_k and d_v") {
    REQUIRE_THROWS_AS(MultiHeadAttention(mha_options(10, 3), init, drop), ValueError);
    REQUIRE_THROWS_WITH(MultiHeadAttention(mha_options(10, 3), init, drop),
                        Catch::Contains("d = 10") && Catch::Contains("h = 3"));
    MultiHeadAttentionOptions o = mha_options(10, 3);
    o.d_k = 4;  // d_v still defaults to d/h
    REQUIRE_THROWS_AS(MultiHeadAttention(o, init, drop), ValueError);
    o.d_v = 4;  // both explicit: fine
    REQUIRE(MultiHeadAttention(o, init, drop).d_v() == 4);
  }
  SECTION("memory of the wrong width") {
    MultiHeadAttentionOptions o = mha_options(8, 2);
    o.kv_dim = 6;
    MultiHeadAttention mha(o, init, drop);
    Var x(random_tensor({2, 3, 8}, data)), memory(random_tensor({2, 5, 7}, data));
    REQUIRE_THROWS_AS(mha.forward(x, memory), ShapeError);
    REQUIRE_THROWS_WITH(mha.forward(x, memory), Catch::Contains("(2, 5, 7)") && Catch::Contains("kv_dim = 6"));
    // Self-attention with kv_dim != d: the input itself is the wrong memory.
    REQUIRE_THROWS_AS(mha.forward(x), ShapeError);
  }
  SECTION("rope with an odd d_k") {
    MultiHeadAttentionOptions o = mha_options(6, 2);  // d_k = 3
    o.rope = true;
    REQUIRE_THROWS_WITH(MultiHeadAttention(o, init, drop), Catch::Contains("d_k = 3"));
  }
  SECTION("input and padding shapes") {
    MultiHeadAttention mha(mha_options(8, 2), init, drop);
    REQUIRE_THROWS_WITH(mha.forward(Var(Tensor({2, 3, 4}))), Catch::Contains("(2, 3, 4)"));
    Tensor bad_pad({2, 4});
    REQUIRE_THROWS_AS(mha.forward(Var(Tensor({2, 3, 8})), Var(), false, &bad_pad), ShapeError);
  }
  SECTION("parameter-free attention needs memory of width d") {
    MultiHeadAttentionOptions o = mha_options(8, 1);
    o.projections = false;
    o.kv_dim = 4;
    REQUIRE_THROWS_WITH(MultiHeadAttention(o, init, drop), Catch::Contains("kv_dim = 4"));
  }
}

TEST_CASE("train() and eval() propagate into attention and feed-forward children", "[layers]") {
  Rng init(1), drop(2);
  MultiHeadAttention mha(mha_options(8, 2), init, drop);
  mha.eval();
  REQUIRE_FALSE(mha.q_proj->training());
  REQUIRE_FALSE(mha.out_proj->training());
  mha.train();
  REQUIRE(mha.v_proj->training());
}
