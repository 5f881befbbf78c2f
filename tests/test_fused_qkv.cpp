// MultiHeadAttention's fused projections (framework/nn/multi_head_attention.cpp): self-
// attention computes Q, K and V as one product, cross-attention K and V, while
// the parameters stay q_proj, k_proj, v_proj with their names, shapes,
// gradients, optimizer state and checkpoint entries. Float32; the float64
// comparison and gradient checks are in tests/gradcheck/test_fused_qkv.cpp.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <string>
#include <unordered_set>

#include "framework/io/checkpoint.h"
#include "framework/io/safetensors.h"
#include "framework/nn/nn.h"
#include "framework/optim/optimizer.h"
#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "tests/cli_harness.h"
#include "tests/fixtures.h"
#include "tests/fused_qkv_reference.h"

using namespace attnlab;
using namespace attnlab::testing;

namespace {

// The shapes of the weights (input 1) of every linear op in the graph below root.
std::multiset<Shape> linear_weight_shapes(const Var& root) {
  std::multiset<Shape> shapes;
  std::unordered_set<Node*> seen{root.node()};
  std::vector<Node*> stack{root.node()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (std::strcmp(n->op, "linear") == 0) shapes.insert(n->inputs[1]->value.shape());
    for (const auto& in : n->inputs)
      if (seen.insert(in.get()).second) stack.push_back(in.get());
  }
  return shapes;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), sizeof(Real) * static_cast<size_t>(a.numel())) == 0;
}

}  // namespace

TEST_CASE("fused Q, K, V projections equal three separate linear ops in float32 to rounding: output and every gradient",
          "[attention][fused]") {
  // Observed ~1e-7; float32 rounding of sums of a few dozen terms stays far
  // below 1e-5, while a wrong column block or a lost gradient term is O(1).
  for (const FusedCase& c : fused_cases()) check_fused_against_unfused(c, 1e-5);
  // And at the benchmark's S shape (d = 64, h = 4), where the products are blocked.
  check_fused_against_unfused({"self at S's width", false, 4, 16, 16, 64, 4, 0, 0, 0, false, false, false}, 1e-5);
}

TEST_CASE("self-attention runs one projection product of width h*(2 d_k + d_v), cross-attention one for K and V",
          "[attention][fused]") {
  Rng init(3), drop(4), data(5);
  MultiHeadAttentionOptions o;
  o.d_model = 8;
  o.n_heads = 2;
  o.d_k = 3;
  o.d_v = 5;
  MultiHeadAttention self(o, init, drop);
  Var x(uniform_tensor({2, 4, 8}, data), true);
  // The stacked (2·3 + 2·3 + 2·5, 8) weight and out_proj's (8, 10): two products, not four.
  CHECK(linear_weight_shapes(self.forward(x)) == std::multiset<Shape>{{22, 8}, {8, 10}});
  o.kv_dim = 6;
  MultiHeadAttention cross(o, init, drop);
  Var memory(uniform_tensor({2, 7, 6}, data), true);
  CHECK(linear_weight_shapes(cross.forward(x, memory)) == std::multiset<Shape>{{6, 8}, {16, 6}, {8, 10}});
}

TEST_CASE("stacked_forward equals the Linears side by side and refuses layers that do not stack", "[layers][fused]") {
  Rng init(11), data(12);
  Linear a(5, 4, init), b(5, 3, init), narrow(4, 3, init), plain(5, 3, init, /*bias=*/false);
  Var x(uniform_tensor({2, 3, 5}, data));
  const Var y = stacked_forward({&a, &b}, x);  // (2, 3, 7)
  const Var reference = concat({a.forward(x), b.forward(x)}, 2);
  CHECK(worst_relative_difference(y.value(), reference.value()) <= 1e-6);
  CHECK(bitwise_equal(stacked_forward({&a}, x).value(), a.forward(x).value()));  // one layer: its own forward
  REQUIRE_THROWS_AS(stacked_forward({}, x), ValueError);
  REQUIRE_THROWS_WITH(stacked_forward({&a, &narrow}, x), Catch::Contains("Linear(4, 3, bias)") &&
                                                             Catch::Contains("share the input width"));
  REQUIRE_THROWS_WITH(stacked_forward({&a, &plain}, x), Catch::Contains("Linear(5, 3, no bias)"));
  REQUIRE_THROWS_AS(stacked_forward({&a, &b}, Var(uniform_tensor({2, 4}, data))), ShapeError);
}

TEST_CASE("a checkpoint of a fused model keeps q_proj, k_proj, v_proj by name and shape and resumes bitwise",
          "[attention][fused][io]") {
  TempDir dir("fused-qkv");
  const TransformerConfig c = model_config("seq2seq", 10, 8, 12, 3, 1, 16);
  const FormattedBatch batch = format_batch(BatchFormat::seq2seq, {{{4, 5, 6, 7}, {7, 6, 5}}, {{8, 4}, {4, 8, 9}}});
  auto step = [&](SequenceModel& model, Optimizer& opt) {  // one AdamW step; the loss before it
    opt.zero_grad();
    Var loss = cross_entropy(model.forward(batch.input), batch.targets);  // logits (B, T, V)
    backward(loss);
    opt.step();
    return loss.item();
  };
  auto saved = make_model(c, 1);
  auto saved_opt = make_optimizer(OptimizerConfig{}, saved->named_parameters());
  step(*saved, *saved_opt);
  save_checkpoint(dir / "ck", *saved, saved_opt.get(), {});

  // The file holds the three projections under torch's names and shapes (out, in).
  const SafetensorsData file = load_safetensors(model_path(dir / "ck"));
  for (const char* attn : {"encoder.blocks.0.attn", "decoder.blocks.0.self_attn", "decoder.blocks.0.cross_attn"})
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
      const std::string name = std::string(attn) + "." + proj;
      INFO(name);
      const Tensor *weight = file.find(name + ".weight"), *bias = file.find(name + ".bias");
      REQUIRE(weight);
      REQUIRE(bias);
      CHECK(weight->shape() == Shape{12, 12});
      CHECK(bias->shape() == Shape{12});
    }
  auto loaded = make_model(c, 2);
  auto loaded_opt = make_optimizer(OptimizerConfig{}, loaded->named_parameters());
  load_checkpoint(dir / "ck", *loaded, loaded_opt.get());
  CHECK(step(*saved, *saved_opt) == step(*loaded, *loaded_opt));
  const auto a = saved->named_parameters(), b = loaded->named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(bitwise_equal(a[i].second.value(), b[i].second.value()));
  }
}
