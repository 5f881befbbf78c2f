// Second derivatives of every op (float64 engine): the exact Hessian-vector
// product (framework/hessian.h, the engine differentiating its own backward)
// against central differences of first-order gradients, by hvpcheck
// (framework/gradcheck.h; tolerance 1e-6 relative, floor 1e-8, h = 1e-6).
//
// An op that is linear in its input has a zero Hessian of sum(P·op(x)), which
// would not exercise its differentiable backward, so every op is also checked
// squared: L = sum(P·op(x)²) has H = 2 Jᵀ diag(P) J + 2 Σ P·op(x)·∇²op(x),
// which a wrong graph backward (a wrong J) or a missing second-order term fails.
#include <catch2/catch.hpp>

#include "framework/hessian.h"
#include "framework/nn/multi_head_attention.h"
#include "framework/ops/composed.h"
#include "framework/ops/ops.h"
#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;
using attnlab::testing::random_tensor;

namespace {

using Fn = std::function<Var(const std::vector<Var>&)>;

Var squared(const Var& y) { return mul(y, y); }

// hvpcheck of fn and of fn squared, on fresh inputs with the given values.
void require_second_order(const Fn& fn, const std::vector<Tensor>& values) {
  for (bool square : {false, true}) {
    std::vector<Var> inputs;
    for (const Tensor& t : values) inputs.emplace_back(t, true);
    INFO((square ? "squared" : "plain"));
    const Fn checked = square ? Fn([&fn](const std::vector<Var>& in) { return squared(fn(in)); }) : fn;
    ATTNLAB_REQUIRE_GRADCHECK(hvpcheck(checked, inputs));
  }
}

Tensor rand(Shape s, uint64_t seed, double lo = -1, double hi = 1) {
  Rng rng(seed);
  return random_tensor(std::move(s), rng, lo, hi);
}

}  // namespace

TEST_CASE("second order: broadcasting add, sub, mul, div", "[second_order][elementwise]") {
  const std::vector<Tensor> xy{rand({3, 4}, 1), rand({4}, 2, 0.5, 2)};  // b a row: summed back
  require_second_order([](const std::vector<Var>& in) { return add(in[0], in[1]); }, xy);
  require_second_order([](const std::vector<Var>& in) { return sub(in[1], in[0]); }, xy);
  require_second_order([](const std::vector<Var>& in) { return mul(in[0], in[1]); }, xy);
  require_second_order([](const std::vector<Var>& in) { return div(in[0], in[1]); }, xy);
  require_second_order([](const std::vector<Var>& in) { return div(in[1], in[0]); },
                       {rand({2, 4}, 3, 0.5, 2), rand({4}, 4)});
  // One Var as both operands: each slot's part is added.
  require_second_order([](const std::vector<Var>& in) { return mul(in[0], in[0]); }, {rand({5}, 5)});
}

TEST_CASE("second order: unary maths", "[second_order][elementwise]") {
  const std::vector<Tensor> x{rand({2, 5}, 6)}, positive{rand({2, 5}, 7, 0.3, 2)};
  require_second_order([](const std::vector<Var>& in) { return neg(in[0]); }, x);
  require_second_order([](const std::vector<Var>& in) { return scale(in[0], -1.7); }, x);
  require_second_order([](const std::vector<Var>& in) { return add_scalar(in[0], 0.4); }, x);
  require_second_order([](const std::vector<Var>& in) { return exp(in[0]); }, x);
  require_second_order([](const std::vector<Var>& in) { return log(in[0]); }, positive);
  require_second_order([](const std::vector<Var>& in) { return sqrt(in[0]); }, positive);
  require_second_order([](const std::vector<Var>& in) { return tanh(in[0]); }, x);
  require_second_order([](const std::vector<Var>& in) { return gelu(in[0]); }, {rand({2, 5}, 8, -3, 3)});
  // ReLU away from its kink (no input within h of 0).
  Tensor away = rand({2, 5}, 9);
  for (int64_t i = 0; i < away.numel(); ++i) away[i] += away[i] > 0 ? Real(0.1) : Real(-0.1);
  require_second_order([](const std::vector<Var>& in) { return relu(in[0]); }, {away});
  const Tensor mask = Tensor::from({5}, {0, 1, 0, 0, 1});
  require_second_order([&mask](const std::vector<Var>& in) { return masked_fill(in[0], mask, 3); }, x);
}

TEST_CASE("second order: reductions, shapes and their broadcasts", "[second_order][shape]") {
  const std::vector<Tensor> x{rand({2, 3, 4}, 10)};
  require_second_order([](const std::vector<Var>& in) { return sum(in[0]); }, x);
  require_second_order([](const std::vector<Var>& in) { return mean(in[0]); }, x);
  for (int axis : {0, 1, -1})
    for (bool keep : {false, true}) {
      INFO("axis " << axis << " keepdim " << keep);
      require_second_order([=](const std::vector<Var>& in) { return sum(in[0], axis, keep); }, x);
      require_second_order([=](const std::vector<Var>& in) { return mean(in[0], axis, keep); }, x);
    }
  require_second_order([](const std::vector<Var>& in) { return reshape(in[0], {4, -1}); }, x);
  require_second_order([](const std::vector<Var>& in) { return transpose(in[0], 0, 2); }, x);
  require_second_order([](const std::vector<Var>& in) { return mul(split(in[0], 1, {1, 2})[1], split(in[0], 1, {2, 1})[0]); },
                       x);
  require_second_order([](const std::vector<Var>& in) { return concat({in[0], exp(in[1])}, 1); },
                       {rand({2, 3, 4}, 11), rand({2, 2, 4}, 12)});
  require_second_order([](const std::vector<Var>& in) { return broadcast_to(in[0], {3, 2, 4}); }, {rand({2, 1}, 13)});
  require_second_order([](const std::vector<Var>& in) { return sum_to(in[0], {3, 1}); }, {rand({2, 3, 4}, 14)});
}

TEST_CASE("second order: products and the linear map", "[second_order][matmul]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("trans_a " << ta << " trans_b " << tb);
      // Batched with a shared 2-d right operand, and both batched.
      require_second_order([=](const std::vector<Var>& in) { return matmul(in[0], in[1], ta, tb); },
                           {rand({2, 3, 3}, 15), rand({3, 3}, 16)});
      require_second_order([=](const std::vector<Var>& in) { return matmul(in[0], in[1], ta, tb); },
                           {rand({2, 3, 3}, 17), rand({2, 3, 3}, 18)});
      require_second_order([=](const std::vector<Var>& in) { return matmul(in[1], in[0], ta, tb); },
                           {rand({2, 3, 3}, 19), rand({3, 3}, 20)});  // a shared left operand
    }
  const std::vector<Tensor> xwb{rand({2, 3, 4}, 21), rand({5, 4}, 22), rand({5}, 23)};
  require_second_order([](const std::vector<Var>& in) { return linear(in[0], in[1], in[2]); }, xwb);
  require_second_order([](const std::vector<Var>& in) { return linear(in[0], in[1], Var()); }, {xwb[0], xwb[1]});
  require_second_order([](const std::vector<Var>& in) { return linear_relu(in[0], in[1], in[2]); }, xwb);
}

TEST_CASE("second order: softmax, log_softmax, cross-entropy, layer norm", "[second_order][fused]") {
  const std::vector<Tensor> x{rand({3, 5}, 24, -2, 2)};
  require_second_order([](const std::vector<Var>& in) { return softmax(in[0]); }, x);
  require_second_order([](const std::vector<Var>& in) { return log_softmax(in[0]); }, x);
  IntTensor targets({3});
  targets.data = {4, -100, 1};
  for (Real smoothing : {Real(0), Real(0.2)}) {
    CrossEntropyOptions ce;
    ce.label_smoothing = smoothing;
    INFO("label smoothing " << smoothing);
    require_second_order([&](const std::vector<Var>& in) { return cross_entropy(in[0], targets, ce); }, x);
  }
  const std::vector<Tensor> xwb{rand({2, 3, 6}, 25, -2, 2), rand({6}, 26), rand({6}, 27)};
  require_second_order([](const std::vector<Var>& in) { return layer_norm(in[0], in[1], in[2]); }, xwb);
  require_second_order([](const std::vector<Var>& in) { return layer_norm(in[0], Var(), Var()); }, {xwb[0]});
}

TEST_CASE("second order: the attention kernels with causal and padding masks", "[second_order][attention]") {
  Tensor padding = Tensor::from({2, 4}, {0, 0, 0, 1, 0, 0, 1, 1});
  for (bool causal : {false, true}) {
    const AttentionMask mask{causal, &padding};
    INFO("causal " << causal);
    require_second_order([&](const std::vector<Var>& in) { return attention(in[0], in[1], in[2], 0.8, mask); },
                         {rand({2, 2, 4, 3}, 28), rand({2, 2, 4, 3}, 29), rand({2, 2, 4, 5}, 30)});
    require_second_order(
        [&](const std::vector<Var>& in) { return attention_heads(in[0], in[1], in[2], 2, 0.8, mask); },
        {rand({2, 4, 6}, 31), rand({2, 4, 6}, 32), rand({2, 4, 4}, 33)});
    require_second_order([&](const std::vector<Var>& in) { return attention_packed(in[0], 2, 3, 2, 0.8, mask); },
                         {rand({2, 4, 16}, 34)});
    // Self-attention with one Var as q, k and v.
    require_second_order([&](const std::vector<Var>& in) { return attention_heads(in[0], in[0], in[0], 2, 0.8, mask); },
                         {rand({2, 4, 6}, 35)});
  }
}

TEST_CASE("second order: rotary, embedding, dropout", "[second_order][positions]") {
  require_second_order([](const std::vector<Var>& in) { return rotary(in[0], 2); }, {rand({2, 3, 4}, 36)});
  require_second_order([](const std::vector<Var>& in) { return rotary_heads(in[0], 2, 1); }, {rand({2, 3, 8}, 37)});
  IntTensor ids({2, 3});
  ids.data = {0, 2, 2, 4, 1, 0};  // repeated ids accumulate
  require_second_order([&ids](const std::vector<Var>& in) { return embedding(in[0], ids); }, {rand({5, 3}, 38)});
  // A fixed mask: the generator is re-seeded on every call.
  require_second_order([](const std::vector<Var>& in) {
    Rng rng(7);
    return dropout(in[0], 0.4, rng, true);
  }, {rand({4, 5}, 39)});
}

TEST_CASE("second order: the composed attention with dropout and hooks has them too", "[second_order][attention]") {
  Tensor padding = Tensor::from({1, 3}, {0, 0, 1});
  const AttentionMask mask{true, &padding};
  require_second_order([&](const std::vector<Var>& in) {
    Rng rng(3);
    return composed_attention(in[0], in[1], in[2], 0.9, mask, 0.3, &rng, true, nullptr, nullptr);
  }, {rand({1, 2, 3, 2}, 40), rand({1, 2, 3, 2}, 41), rand({1, 2, 3, 2}, 42)});
}

TEST_CASE("grad_graph names an op recorded without its differentiable backward", "[second_order][errors]") {
  Var x(rand({3}, 43), true);
  Var y = exp(x);  // recorded without a SecondOrderGuard
  try {
    grad_graph({sum(y)}, {Var(Tensor::from({}, {Real(1)}))}, {x});
    FAIL("grad_graph accepted a first-order graph");
  } catch (const ValueError& e) {
    CHECK(std::string(e.what()).find("'sum'") != std::string::npos);
  }
  SecondOrderGuard second_order;
  Var z = sum(exp(x));
  REQUIRE(grad_graph({z}, {Var(Tensor::from({}, {Real(1)}))}, {x})[0].requires_grad());
}

TEST_CASE("a Hessian-vector product keeps the parameters' gradients and can be applied again",
          "[second_order][hessian]") {
  // L = sum(a² b) for a, b scalars... of shape (2): H = [[2b, 2a], [2a, 0]] per element.
  Var a(Tensor::from({2}, {1.5, -2}), true), b(Tensor::from({2}, {0.5, 3}), true);
  a.grad() = Tensor::from({2}, {7, 8});  // a step's gradient, to be kept
  HessianVectorProduct hvp([&] { return sum(mul(mul(a, a), b)); }, {a, b});
  CHECK(hvp.loss() == Approx(1.5 * 1.5 * 0.5 + 4 * 3));
  CHECK(hvp.gradient()[0][1] == Approx(2 * -2 * 3));
  for (int repeat = 0; repeat < 2; ++repeat) {
    const std::vector<Tensor> hv = hvp.apply({Tensor::from({2}, {1, 0}), Tensor::from({2}, {0, 1})});
    CHECK(hv[0][0] == Approx(2 * 0.5));   // ∂²L/∂a0² · 1
    CHECK(hv[0][1] == Approx(2 * -2));    // ∂²L/∂a1∂b1 · 1
    CHECK(hv[1][0] == Approx(2 * 1.5));   // ∂²L/∂b0∂a0 · 1
    CHECK(hv[1][1] == Approx(0));         // ∂²L/∂b1² = 0
  }
  CHECK(a.grad()[0] == 7);
  CHECK(a.grad()[1] == 8);
  CHECK_FALSE(b.has_grad());
  CHECK_THROWS_AS(hvp.apply({Tensor({3}), Tensor({2})}), ShapeError);
}

TEST_CASE("the gradient graph grows linearly with depth: a fused op's composed backward stops at its inputs",
          "[second_order][hessian]") {
  // A stack of fused layer norms, each rebuilt in composed form when differentiated twice: the
  // nodes the gradient graph creates per layer must not depend on the layers below it.
  auto nodes_for = [](int depth) {
    Var x(rand({3, 6}, 44), true), w(rand({6}, 45), true);
    const uint64_t before = nodes_created();
    HessianVectorProduct hvp(
        [&] {
          Var h = x;
          for (int k = 0; k < depth; ++k) h = tanh(layer_norm(h, w, Var()));
          return sum(mul(h, h));
        },
        {x, w});
    return static_cast<double>(nodes_created() - before);
  };
  const double per_layer_low = nodes_for(8) - nodes_for(4), per_layer_high = nodes_for(16) - nodes_for(12);
  INFO("nodes for 4 layers more: at 4-8 " << per_layer_low << ", at 12-16 " << per_layer_high);
  CHECK(per_layer_high == per_layer_low);
}
