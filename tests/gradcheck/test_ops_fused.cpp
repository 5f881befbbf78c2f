// Finite-difference gradient checks of the fused kernels (float64 engine):
// softmax, log_softmax, layer_norm, cross_entropy, attention. Shapes include
// size-1 dims, T_q != T_k and d_k != d_v; every mask kind and several scales.
// Tolerance: gradcheck.h's default (relative 1e-6, absolute floor 1e-8), which
// leaves orders of magnitude over float64 finite-difference noise (~1e-10)
// while a dropped or doubled term fails.
#include <limits>

#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;
using attnlab::testing::gradcheck;
using attnlab::testing::random_tensor;

namespace {

const Real kInf = std::numeric_limits<Real>::infinity();

std::string shape_name(const Shape& s) { return shape_str(s); }

// A random key-padding mask (B, T_k) with about a third of the keys padded.
Tensor random_padding(int64_t B, int64_t T_k, Rng& rng) {
  Tensor pad({B, T_k});
  for (int64_t i = 0; i < pad.numel(); ++i) pad[i] = rng.uniform() < 0.33 ? 1 : 0;
  return pad;
}

IntTensor random_targets(const Shape& shape, int64_t V, Rng& rng, int32_t ignore, double ignore_rate) {
  IntTensor t(shape);
  for (auto& x : t.data)
    x = rng.uniform() < ignore_rate ? ignore : static_cast<int32_t>(rng.integer(0, V - 1));
  return t;
}

}  // namespace

TEST_CASE("softmax gradient matches finite differences on assorted shapes", "[gradcheck][softmax]") {
  Rng rng(1);
  for (const Shape& shape : std::vector<Shape>{{5}, {1, 1}, {3, 4}, {2, 1, 7}, {2, 3, 1}, {4, 6, 3}}) {
    INFO("shape " << shape_name(shape));
    Var x(random_tensor(shape, rng, -3, 3), true);
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return softmax(in[0]); }, {x}));
  }
}

TEST_CASE("softmax gradient is right with -inf entries and zero on a fully masked row", "[gradcheck][softmax]") {
  Rng rng(2);
  Tensor t = random_tensor({3, 5}, rng, -2, 2);
  t[1] = -kInf;  // row 0: partially masked
  t[4] = -kInf;
  for (int j = 0; j < 5; ++j) t[5 + j] = -kInf;  // row 1: fully masked
  Var x(t, true);
  // Perturbing a -inf entry changes nothing, so the numeric gradient there is
  // 0; the analytic one must be exactly that too.
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return softmax(in[0]); }, {x}));
  for (int j = 0; j < 5; ++j) REQUIRE(x.grad()[5 + j] == 0);
}

TEST_CASE("log_softmax gradient matches finite differences on assorted shapes", "[gradcheck][softmax]") {
  Rng rng(3);
  for (const Shape& shape : std::vector<Shape>{{5}, {1, 1}, {3, 4}, {2, 1, 7}, {2, 3, 1}, {4, 6, 3}}) {
    INFO("shape " << shape_name(shape));
    Var x(random_tensor(shape, rng, -3, 3), true);
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return log_softmax(in[0]); }, {x}));
  }
}

TEST_CASE("layer_norm gradients (x, weight, bias) match finite differences", "[gradcheck][layer_norm]") {
  Rng rng(4);
  struct Case {
    Shape shape;
    Real eps;
  };
  // d = 1 makes x_hat = 0 (all gradients but the bias's vanish); eps = 0.1 makes
  // the eps term matter in rstd.
  for (const Case& c : std::vector<Case>{{{1, 5}, 1e-5}, {{3, 4}, 1e-5}, {{2, 3, 8}, 0.1}, {{4, 1}, 1e-5}, {{6}, 1e-5}}) {
    const int64_t d = c.shape.back();
    INFO("shape " << shape_name(c.shape) << " eps " << c.eps);
    Var x(random_tensor(c.shape, rng, -2, 2), true);
    Var w(random_tensor({d}, rng, 0.5, 1.5), true);
    Var b(random_tensor({d}, rng), true);
    const Real eps = c.eps;
    Var wc(w.value(), false), bc(b.value(), false);
    // Every combination of present / absent / constant affine terms.
    const std::vector<std::pair<const char*, std::vector<Var>>> variants{
        {"weight and bias", {x, w, b}},
        {"weight only", {x, w, Var()}},
        {"bias only", {x, Var(), b}},
        {"no affine terms", {x, Var(), Var()}},
        {"constant affine terms", {x, wc, bc}}};
    for (const auto& [name, inputs] : variants) {
      INFO(name);
      std::vector<Var> used;  // gradcheck perturbs only defined inputs
      for (const Var& v : inputs) used.push_back(v.defined() ? v : Var(Tensor(), false));
      ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
          [eps, w_on = inputs[1].defined(), b_on = inputs[2].defined()](const std::vector<Var>& in) {
            return layer_norm(in[0], w_on ? in[1] : Var(), b_on ? in[2] : Var(), eps);
          },
          used));
    }
  }
}

TEST_CASE("layer_norm gradient is right when the row mean dwarfs its spread", "[gradcheck][layer_norm]") {
  // x = 100 + small noise: a one-pass variance would cancel badly here.
  Rng rng(5);
  Tensor t = random_tensor({3, 6}, rng, -1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] += 100;
  Var x(t, true);
  Var w(random_tensor({6}, rng, 0.5, 1.5), true);
  ATTNLAB_REQUIRE_GRADCHECK(
      gradcheck([](const std::vector<Var>& in) { return layer_norm(in[0], in[1], Var(), 1e-5); }, {x, w}));
}

TEST_CASE("cross_entropy gradient matches finite differences with ignore_index and label smoothing",
          "[gradcheck][cross_entropy]") {
  Rng rng(6);
  struct Case {
    Shape logits;
    int32_t ignore;
    double ignore_rate;
    Real smoothing;
  };
  for (const Case& c : std::vector<Case>{{{4, 5}, -100, 0.0, 0},
                                         {{4, 5}, -100, 0.3, 0},
                                         {{2, 3, 6}, -100, 0.3, 0.1},
                                         {{3, 4, 7}, 0, 0.0, 0.25},  // ignore_index is a real class id
                                         {{1, 1, 3}, -100, 0.0, 0.5},
                                         {{5, 1}, -100, 0.2, 0.2}}) {  // V = 1: loss and gradient 0
    INFO("logits " << shape_name(c.logits) << " ignore " << c.ignore << " smoothing " << c.smoothing);
    const int64_t V = c.logits.back();
    const Shape target_shape(c.logits.begin(), c.logits.end() - 1);
    IntTensor targets = random_targets(target_shape, V, rng, c.ignore, c.ignore_rate);
    Var x(random_tensor(c.logits, rng, -3, 3), true);
    CrossEntropyOptions opt;
    opt.ignore_index = c.ignore;
    opt.label_smoothing = c.smoothing;
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
        [&targets, opt](const std::vector<Var>& in) { return cross_entropy(in[0], targets, opt); }, {x}));
  }
}

TEST_CASE("cross_entropy gradient scales with the upstream gradient", "[gradcheck][cross_entropy]") {
  // The loss is usually the root (seed 1); here it feeds a further op, so
  // backward must multiply by the incoming gradient rather than assume 1.
  Rng rng(7);
  Var x(random_tensor({3, 4}, rng, -2, 2), true);
  IntTensor targets({3});
  targets.data = {1, -100, 3};
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
      [&targets](const std::vector<Var>& in) {
        CrossEntropyOptions opt;
        opt.label_smoothing = 0.1;
        return scale(cross_entropy(in[0], targets, opt), 2.5);
      },
      {x}));
}

namespace {
struct AttnCase {
  int64_t B, h, T_q, T_k, d_k, d_v;
};
}  // namespace

TEST_CASE("attention gradients (q, k, v) match finite differences for every mask kind and scale",
          "[gradcheck][attention]") {
  Rng rng(8);
  // Includes size-1 dims, T_q != T_k both ways (T_q > T_k with a causal mask
  // leaves the first query rows fully masked) and d_k != d_v.
  const std::vector<AttnCase> cases{
      {1, 1, 1, 1, 1, 1}, {2, 3, 4, 5, 3, 2}, {2, 2, 5, 3, 4, 6}, {1, 2, 6, 6, 8, 8}, {3, 1, 2, 4, 2, 1}};
  const std::vector<Real> scales{1.0, 0.35, 2.0};
  for (const AttnCase& c : cases) {
    for (int mask_kind = 0; mask_kind < 4; ++mask_kind) {
      for (Real s : scales) {
        const bool causal = mask_kind & 1, padded = mask_kind & 2;
        INFO("B " << c.B << " h " << c.h << " T_q " << c.T_q << " T_k " << c.T_k << " d_k " << c.d_k << " d_v "
                  << c.d_v << " causal " << causal << " padding " << padded << " scale " << s);
        Tensor pad = random_padding(c.B, c.T_k, rng);
        AttentionMask mask;
        mask.causal = causal;
        mask.key_padding = padded ? &pad : nullptr;
        Var q(random_tensor({c.B, c.h, c.T_q, c.d_k}, rng), true);
        Var k(random_tensor({c.B, c.h, c.T_k, c.d_k}, rng), true);
        Var v(random_tensor({c.B, c.h, c.T_k, c.d_v}, rng), true);
        ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
            [s, mask](const std::vector<Var>& in) { return attention(in[0], in[1], in[2], s, mask); }, {q, k, v}));
      }
    }
  }
}

TEST_CASE("attention gradient is zero through a batch item whose keys are all padding",
          "[gradcheck][attention]") {
  Rng rng(9);
  Tensor pad({2, 4});
  for (int j = 0; j < 4; ++j) pad[4 + j] = 1;  // batch item 1: every key is padding
  pad[1] = 1;
  AttentionMask mask;
  mask.key_padding = &pad;
  Var q(random_tensor({2, 2, 3, 3}, rng), true);
  Var k(random_tensor({2, 2, 4, 3}, rng), true);
  Var v(random_tensor({2, 2, 4, 2}, rng), true);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
      [mask](const std::vector<Var>& in) { return attention(in[0], in[1], in[2], 0.5, mask); }, {q, k, v}));
  for (int64_t i = q.numel() / 2; i < q.numel(); ++i) REQUIRE(q.grad()[i] == 0);
  for (int64_t i = v.numel() / 2; i < v.numel(); ++i) REQUIRE(v.grad()[i] == 0);
}

TEST_CASE("attention accumulates correctly when q, k and v are the same Var", "[gradcheck][attention]") {
  // Parameter-free self-attention: one tensor plays all three roles, so the
  // three gradient paths add into one buffer.
  Rng rng(10);
  Var x(random_tensor({2, 2, 4, 3}, rng), true);
  AttentionMask mask;
  mask.causal = true;
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
      [mask](const std::vector<Var>& in) { return attention(in[0], in[0], in[0], 0.7, mask); }, {x}));
}

TEST_CASE("attention passes gradients only to the inputs that need them", "[gradcheck][attention]") {
  Rng rng(11);
  Var q(random_tensor({1, 2, 3, 2}, rng), false);
  Var k(random_tensor({1, 2, 4, 2}, rng), true);
  Var v(random_tensor({1, 2, 4, 3}, rng), false);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
      [](const std::vector<Var>& in) { return attention(in[0], in[1], in[2], 1.3); }, {q, k, v}));
  REQUIRE_FALSE(q.has_grad());
  REQUIRE_FALSE(v.has_grad());
}
