// Finite-difference gradient checks of the elementwise ops (float64 engine):
// the four broadcasting binary ops under every broadcasting pattern, the
// unary maths, scale / add_scalar / neg and masked_fill.
// Tolerance: gradcheck.h's default (relative 1e-6, absolute floor 1e-8),
// orders of magnitude above float64 finite-difference noise (~1e-10) while a
// dropped or doubled term gives an error of order 1.
#include <string>
#include <utility>
#include <vector>

#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;
using attnlab::testing::gradcheck;
using attnlab::testing::random_tensor;

namespace {

Var param(const Shape& shape, Rng& rng, double lo = -1.0, double hi = 1.0) {
  return Var(random_tensor(shape, rng, lo, hi), true);
}

// Values with |x| in [lo, hi] and a random sign: keeps relu off its kink and
// divisors away from 0, where central differences would straddle a singularity.
Var away_from_zero(const Shape& shape, Rng& rng, double lo, double hi) {
  Tensor t = random_tensor(shape, rng, lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i)
    if (rng.uniform() < 0.5) t[i] = -t[i];
  return Var(std::move(t), true);
}

// Operand shape pairs covering each broadcasting pattern.
const std::vector<std::pair<Shape, Shape>> kBroadcastCases = {
    {{3, 4}, {3, 4}},              // same shape
    {{3, 4}, {}},                  // b a 0-d scalar
    {{}, {3, 4}},                  // a a 0-d scalar
    {{2, 3}, {1}},                 // b a one-element tensor
    {{2, 3, 4}, {4}},              // trailing row (bias)
    {{4}, {2, 3, 4}},              // trailing row on the left
    {{5, 4}, {1, 4}},              // row with an explicit leading 1
    {{3, 4}, {3, 1}},              // column (per-row scale)
    {{2, 1, 4}, {3, 1}},           // general: both operands stretch
    {{3, 1}, {1, 4}},              // outer-product pattern
    {{2, 2, 3, 3}, {2, 1, 1, 3}},  // key-padding mask pattern (B, h, T, T) with (B, 1, 1, T)
    {{1, 1}, {1, 1}},              // all size-1
    {{1, 5}, {1}},                 // size-1 leading dim and scalar
};

using BinaryOp = Var (*)(const Var&, const Var&);

void check_binary(BinaryOp op, const char* name, bool b_nonzero) {
  Rng rng(11);
  for (const auto& [sa, sb] : kBroadcastCases) {
    INFO(name << " " << shape_str(sa) << " with " << shape_str(sb));
    Var a = param(sa, rng);
    Var b = b_nonzero ? away_from_zero(sb, rng, 0.5, 2.0) : param(sb, rng);
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([op](const std::vector<Var>& in) { return op(in[0], in[1]); }, {a, b}));
  }
}

}  // namespace

TEST_CASE("add gradient matches finite differences under every broadcasting pattern", "[gradcheck][elementwise]") {
  check_binary(&add, "add", false);
}

TEST_CASE("sub gradient matches finite differences under every broadcasting pattern", "[gradcheck][elementwise]") {
  check_binary(&sub, "sub", false);
}

TEST_CASE("mul gradient matches finite differences under every broadcasting pattern", "[gradcheck][elementwise]") {
  check_binary(&mul, "mul", false);
}

TEST_CASE("div gradient matches finite differences under every broadcasting pattern", "[gradcheck][elementwise]") {
  check_binary(&div, "div", true);
}

TEST_CASE("a binary op with one constant operand gives the other its full gradient", "[gradcheck][elementwise]") {
  Rng rng(12);
  Var a = param({3, 4}, rng);
  Var c(random_tensor({4}, rng), false);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([c](const std::vector<Var>& in) { return mul(c, in[0]); }, {a}));
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([c](const std::vector<Var>& in) { return div(in[0], add_scalar(c, 3)); }, {a}));
}

TEST_CASE("an operand used twice accumulates both gradient paths", "[gradcheck][elementwise]") {
  Rng rng(13);
  Var x = param({2, 3}, rng);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return mul(in[0], in[0]); }, {x}));
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return sub(in[0], in[0] * in[0]); }, {x}));
}

TEST_CASE("unary op gradients match finite differences", "[gradcheck][elementwise]") {
  using UnaryFn = std::function<Var(const Var&)>;
  struct Case {
    const char* name;
    UnaryFn fn;
    double lo, hi;  // input range
    bool signed_away_from_zero;
  };
  const std::vector<Case> cases = {
      {"exp", [](const Var& x) { return attnlab::exp(x); }, -2.0, 2.0, false},
      {"log", [](const Var& x) { return attnlab::log(x); }, 0.1, 3.0, false},    // positive inputs only
      {"sqrt", [](const Var& x) { return attnlab::sqrt(x); }, 0.1, 3.0, false},  // positive inputs only
      {"tanh", [](const Var& x) { return attnlab::tanh(x); }, -3.0, 3.0, false},
      {"relu", [](const Var& x) { return relu(x); }, 0.1, 2.0, true},  // |x| >= 0.1: off the kink
      {"gelu", [](const Var& x) { return gelu(x); }, -4.0, 4.0, false},
      {"neg", [](const Var& x) { return neg(x); }, -1.0, 1.0, false},
      {"scale", [](const Var& x) { return scale(x, -1.7); }, -1.0, 1.0, false},
      {"add_scalar", [](const Var& x) { return add_scalar(x, 0.3); }, -1.0, 1.0, false},
  };
  Rng rng(14);
  for (const Case& c : cases)
    for (const Shape& shape : std::vector<Shape>{{1}, {2, 5}, {3, 1, 4}}) {
      INFO(c.name << " on " << shape_str(shape));
      Var x = c.signed_away_from_zero ? away_from_zero(shape, rng, c.lo, c.hi) : param(shape, rng, c.lo, c.hi);
      UnaryFn fn = c.fn;
      ATTNLAB_REQUIRE_GRADCHECK(gradcheck([fn](const std::vector<Var>& in) { return fn(in[0]); }, {x}));
    }
}

TEST_CASE("masked_fill passes gradient only at unmasked positions", "[gradcheck][elementwise]") {
  Rng rng(15);
  // A finite fill value: with -inf the projected loss itself would be infinite.
  for (const Shape& mask_shape : std::vector<Shape>{{2, 3, 4}, {3, 4}, {2, 1, 4}, {4}, {1}}) {
    INFO("mask " << shape_str(mask_shape));
    Tensor mask(mask_shape);
    for (int64_t i = 0; i < mask.numel(); ++i) mask[i] = rng.uniform() < 0.4 ? 1 : 0;
    Var x = param({2, 3, 4}, rng);
    ATTNLAB_REQUIRE_GRADCHECK(
        gradcheck([mask](const std::vector<Var>& in) { return masked_fill(in[0], mask, -5.0); }, {x}));
  }
}

TEST_CASE("a chain of elementwise ops differentiates through every link", "[gradcheck][elementwise]") {
  Rng rng(16);
  Var x = param({3, 4}, rng);
  Var w = param({4}, rng);
  Var s = away_from_zero({3, 1}, rng, 0.5, 2.0);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
      [](const std::vector<Var>& in) { return gelu(attnlab::tanh(in[0] * in[1]) / in[2] + attnlab::exp(-in[0])); },
      {x, w, s}));
}
