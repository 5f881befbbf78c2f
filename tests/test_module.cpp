// Module bookkeeping through real layers: dotted names, order, lookup, counts,
// train/eval propagation, zero_grad.
#include <catch2/catch.hpp>

#include "framework/nn/nn.h"
#include "framework/ops/reduce.h"

using namespace attnlab;

namespace {

// A module with its own parameter and nested children two levels deep.
class Block : public Module {
 public:
  Block(Rng& init, Rng& drop) {
    gain = register_parameter("gain", Tensor({4}, 1));
    ln = register_module("ln", std::make_shared<LayerNorm>(4));
    ff = register_module("ff", std::make_shared<FeedForward>(4, 6, Activation::relu, 0.5, init, drop));
  }
  Var gain;
  std::shared_ptr<LayerNorm> ln;
  std::shared_ptr<FeedForward> ff;
};

}  // namespace

TEST_CASE("parameter names are dotted paths, own parameters before children, in registration order", "[module]") {
  Rng init(1), drop(2);
  Block block(init, drop);
  std::vector<std::string> names;
  for (const auto& [name, var] : block.named_parameters()) names.push_back(name);
  const std::vector<std::string> expected = {"gain",          "ln.weight",     "ln.bias",      "ff.fc1.weight",
                                             "ff.fc1.bias",   "ff.fc2.weight", "ff.fc2.bias"};
  REQUIRE(names == expected);
  // parameters() lists the same nodes in the same order.
  auto named = block.named_parameters();
  auto plain = block.parameters();
  REQUIRE(plain.size() == named.size());
  for (size_t i = 0; i < plain.size(); ++i) REQUIRE(plain[i].node() == named[i].second.node());
}

TEST_CASE("parameter() finds a nested parameter by path and names a missing one", "[module]") {
  Rng init(1), drop(2);
  Block block(init, drop);
  REQUIRE(block.parameter("ff.fc2.bias").node() == block.ff->fc2->bias.node());
  REQUIRE(block.parameter("gain").node() == block.gain.node());
  REQUIRE_THROWS_AS(block.parameter("ff.fc3.bias"), ValueError);
  REQUIRE_THROWS_WITH(block.parameter("ff.fc3.bias"), Catch::Contains("ff.fc3.bias"));
}

TEST_CASE("parameter_count adds up every nested parameter", "[module]") {
  Rng init(1), drop(2);
  Block block(init, drop);
  // gain 4, ln 4 + 4, fc1 4*6 + 6, fc2 6*4 + 4
  REQUIRE(block.parameter_count() == 4 + 8 + (24 + 6) + (24 + 4));
}

TEST_CASE("train() and eval() reach every descendant", "[module]") {
  Rng init(1), drop(2);
  Block block(init, drop);
  REQUIRE(block.ff->dropout->training());
  block.eval();
  REQUIRE_FALSE(block.training());
  REQUIRE_FALSE(block.ln->training());
  REQUIRE_FALSE(block.ff->training());
  REQUIRE_FALSE(block.ff->fc1->training());
  REQUIRE_FALSE(block.ff->dropout->training());
  block.train();
  REQUIRE(block.ff->dropout->training());
  REQUIRE(block.ff->fc2->training());
}

TEST_CASE("zero_grad clears the gradients of every nested parameter", "[module]") {
  Rng init(1), drop(2), data(3);
  Block block(init, drop);
  block.eval();  // no dropout: every parameter gets a non-zero gradient
  Tensor x({3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<Real>(data.uniform(-1, 1));
  backward(sum(block.ff->forward(block.ln->forward(Var(x)))));
  REQUIRE(block.ff->fc2->bias.has_grad());
  REQUIRE(block.ff->fc2->bias.grad()[0] == Approx(3));  // d/db of a sum over 3 rows
  block.zero_grad();
  for (const auto& [name, var] : block.named_parameters()) {
    INFO(name);
    if (!var.has_grad()) continue;
    for (int64_t i = 0; i < var.numel(); ++i) REQUIRE(var.grad()[i] == 0);
  }
}
