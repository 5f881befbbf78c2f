// Gradient checks of the layers (float64 engine): every layer's gradients with
// respect to its inputs AND its parameters (the module's parameter Vars are
// passed to gradcheck as extra inputs; the module reads the same nodes, so
// gradcheck's perturbations reach it). Tolerances: gradcheck.h's defaults
// (relative 1e-6 with central differences of step 1e-6) unless stated.
#include "tests/gradcheck/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "framework/nn/nn.h"
#include "framework/ops/rotary.h"

using namespace attnlab;
using attnlab::testing::gradcheck;
using attnlab::testing::random_tensor;

namespace {

Var random_input(Shape shape, Rng& rng) { return Var(random_tensor(std::move(shape), rng), true); }

// [inputs..., every parameter of m]
std::vector<Var> with_parameters(std::vector<Var> inputs, const Module& m) {
  for (const Var& p : m.parameters()) inputs.push_back(p);
  return inputs;
}

// Replace a deterministic init (ones / zeros) by random values so that a
// gradient formula that only works at the init cannot pass.
void randomize(Var& p, Rng& rng) {
  for (int64_t i = 0; i < p.numel(); ++i) p.value()[i] = static_cast<Real>(rng.uniform(-1.0, 1.0));
}

MultiHeadAttentionOptions mha_options(int64_t d, int64_t h) {
  MultiHeadAttentionOptions o;
  o.d_model = d;
  o.n_heads = h;
  return o;
}

}  // namespace

TEST_CASE("Linear gradients w.r.t. input, weight and bias", "[gradcheck][layers]") {
  Rng init(1), data(2);
  Linear fc(5, 4, init);
  Var x = random_input({2, 3, 5}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return fc.forward(in[0]); },
                                      with_parameters({x}, fc)));
}

TEST_CASE("Linear without bias: gradients w.r.t. input and weight", "[gradcheck][layers]") {
  Rng init(3), data(4);
  Linear fc(4, 6, init, /*bias=*/false);
  REQUIRE(fc.parameters().size() == 1);
  Var x = random_input({3, 4}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return fc.forward(in[0]); },
                                      with_parameters({x}, fc)));
}

TEST_CASE("Embedding gradient accumulates over repeated ids", "[gradcheck][layers]") {
  Rng init(5);
  Embedding emb(6, 3, init);
  IntTensor ids({2, 4});
  ids.data = {1, 3, 3, 0, 5, 1, 1, 2};
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>&) { return emb.forward(ids); },
                                      with_parameters({}, emb)));
}

TEST_CASE("LearnedPositional gradient reaches exactly the rows used", "[gradcheck][layers]") {
  Rng init(6);
  LearnedPositional pos(7, 4, init);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>&) { return pos.forward(3, 2); },
                                      with_parameters({}, pos)));
}

TEST_CASE("LayerNorm gradients w.r.t. input, weight and bias", "[gradcheck][layers]") {
  Rng data(7);
  LayerNorm ln(6);
  randomize(ln.weight, data);
  randomize(ln.bias, data);
  Var x = random_input({2, 3, 6}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return ln.forward(in[0]); },
                                      with_parameters({x}, ln)));
}

TEST_CASE("FeedForward (relu) gradients, inputs off the kink", "[gradcheck][layers]") {
  Rng init(8), drop(9), data(10);
  FeedForward ff(4, 8, Activation::relu, 0, init, drop);
  Var x = random_input({2, 3, 4}, data);
  {
    // Precondition: no pre-activation within 1e-3 of relu's kink, so a finite
    // difference step of 1e-6 (moving a pre-activation by at most ~1e-6 here)
    // never crosses it and the numeric derivative is the one-sided one.
    NoGradGuard no_grad;
    Var pre = ff.fc1->forward(x);
    Real closest = 1;
    for (int64_t i = 0; i < pre.numel(); ++i) closest = std::min(closest, std::abs(pre.value()[i]));
    REQUIRE(closest > 1e-3);
  }
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return ff.forward(in[0]); },
                                      with_parameters({x}, ff)));
}

TEST_CASE("FeedForward (gelu) gradients", "[gradcheck][layers]") {
  Rng init(11), drop(12), data(13);
  FeedForward ff(4, 8, Activation::gelu, 0, init, drop);
  Var x = random_input({2, 3, 4}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return ff.forward(in[0]); },
                                      with_parameters({x}, ff)));
}

TEST_CASE("FeedForward with dropout in training: gradients through a fixed mask", "[gradcheck][layers]") {
  Rng init(14), drop(15), data(16);
  FeedForward ff(4, 8, Activation::gelu, 0.4, init, drop);
  const std::string state = drop.state();
  Var x = random_input({2, 3, 4}, data);
  // Reseeding before every evaluation gives every finite-difference probe the same mask.
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
      [&](const std::vector<Var>& in) {
        drop.set_state(state);
        return ff.forward(in[0]);
      },
      with_parameters({x}, ff)));
}

TEST_CASE("rotary op gradient is the inverse rotation", "[gradcheck][rotary]") {
  Rng data(17);
  Var x = random_input({2, 2, 5, 6}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return rotary(in[0]); }, {x}));
  // A position offset and a small base make every pair turn by a large, distinct angle.
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return rotary(in[0], 3, 7); }, {x}));
  Var joined = random_input({2, 5, 12}, data);  // (B, T, h·d_k), h = 2, d_k = 6
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return rotary_heads(in[0], 2, 3, 7); }, {joined}));
}

TEST_CASE("MultiHeadAttention self-attention gradients", "[gradcheck][attention]") {
  Rng init(20), drop(21), data(22);
  MultiHeadAttention mha(mha_options(8, 2), init, drop);
  Var x = random_input({2, 4, 8}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return mha.forward(in[0]); },
                                      with_parameters({x}, mha)));
}

TEST_CASE("MultiHeadAttention cross-attention gradients w.r.t. queries' input and memory", "[gradcheck][attention]") {
  Rng init(23), drop(24), data(25);
  MultiHeadAttentionOptions o = mha_options(8, 2);
  o.kv_dim = 6;
  MultiHeadAttention mha(o, init, drop);
  Var x = random_input({2, 3, 8}, data);
  Var memory = random_input({2, 5, 6}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return mha.forward(in[0], in[1]); },
                                      with_parameters({x, memory}, mha)));
}

TEST_CASE("MultiHeadAttention causal self-attention gradients", "[gradcheck][attention]") {
  Rng init(26), drop(27), data(28);
  MultiHeadAttention mha(mha_options(8, 2), init, drop);
  Var x = random_input({2, 4, 8}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return mha.forward(in[0], Var(), true); },
                                      with_parameters({x}, mha)));
}

TEST_CASE("MultiHeadAttention key-padding gradients", "[gradcheck][attention]") {
  Rng init(29), drop(30), data(31);
  MultiHeadAttention mha(mha_options(8, 4), init, drop);
  Var x = random_input({2, 4, 8}, data);
  Tensor pad = Tensor::from({2, 4}, {0, 0, 0, 1, 0, 0, 1, 1});
  SECTION("padding alone") {
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
        [&](const std::vector<Var>& in) { return mha.forward(in[0], Var(), false, &pad); }, with_parameters({x}, mha)));
  }
  SECTION("padding and causal, including a fully masked query row (defined as zero)") {
    Tensor pad_first = Tensor::from({2, 4}, {1, 0, 0, 0, 0, 0, 0, 1});  // query 0 of batch 0 sees nothing
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
        [&](const std::vector<Var>& in) { return mha.forward(in[0], Var(), true, &pad_first); },
        with_parameters({x}, mha)));
  }
}

TEST_CASE("MultiHeadAttention gradients for every scale kind", "[gradcheck][attention]") {
  for (const char* text : {"sqrt", "none", "linear", "0.7"}) {
    INFO("scale " << text);
    Rng init(32), drop(33), data(34);
    MultiHeadAttentionOptions o = mha_options(8, 2);
    o.scale = parse_attention_scale(text);
    MultiHeadAttention mha(o, init, drop);
    Var x = random_input({2, 3, 8}, data);
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return mha.forward(in[0]); },
                                        with_parameters({x}, mha)));
  }
}

TEST_CASE("MultiHeadAttention with d_k != d_v gradients", "[gradcheck][attention]") {
  Rng init(35), drop(36), data(37);
  MultiHeadAttentionOptions o = mha_options(8, 2);
  o.d_k = 3;
  o.d_v = 5;
  MultiHeadAttention mha(o, init, drop);
  Var x = random_input({2, 3, 8}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return mha.forward(in[0], Var(), true); },
                                      with_parameters({x}, mha)));
}

TEST_CASE("MultiHeadAttention with rope gradients", "[gradcheck][attention]") {
  Rng init(38), drop(39), data(40);
  MultiHeadAttentionOptions o = mha_options(8, 2);
  o.rope = true;
  MultiHeadAttention mha(o, init, drop);
  Var x = random_input({2, 5, 8}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return mha.forward(in[0], Var(), true); },
                                      with_parameters({x}, mha)));
}

TEST_CASE("parameter-free attention gradients (queries, keys and values are the input)", "[gradcheck][attention]") {
  Rng init(41), drop(42), data(43);
  MultiHeadAttentionOptions o = mha_options(6, 3);
  o.projections = false;
  MultiHeadAttention mha(o, init, drop);
  REQUIRE(mha.parameters().empty());
  Var x = random_input({2, 4, 6}, data);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return mha.forward(in[0]); }, {x}));
  SECTION("cross-attention: gradient reaches the memory through weights and average") {
    Var memory = random_input({2, 3, 6}, data);
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([&](const std::vector<Var>& in) { return mha.forward(in[0], in[1]); },
                                        {x, memory}));
  }
}

TEST_CASE("MultiHeadAttention with dropout in training: gradients through a fixed mask", "[gradcheck][attention]") {
  Rng init(44), drop(45), data(46);
  MultiHeadAttentionOptions o = mha_options(8, 2);
  o.dropout = 0.3;
  MultiHeadAttention mha(o, init, drop);
  const std::string state = drop.state();
  Var x = random_input({2, 4, 8}, data);
  Tensor pad = Tensor::from({2, 4}, {0, 0, 0, 1, 0, 0, 0, 0});
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
      [&](const std::vector<Var>& in) {
        drop.set_state(state);
        return mha.forward(in[0], Var(), true, &pad);
      },
      with_parameters({x}, mha)));
}
