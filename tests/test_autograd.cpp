// The engine's bookkeeping: recording, accumulation, NoGradGuard, release.
#include <catch2/catch.hpp>

#include "framework/autograd.h"

using namespace attnlab;

namespace {
// y = a * b elementwise, written against make_result directly so this file
// tests the engine alone, independent of the op library.
Var times(const Var& a, const Var& b) {
  Tensor out(a.shape());
  for (int64_t i = 0; i < out.numel(); ++i) out[i] = a.value()[i] * b.value()[i];
  return make_result(std::move(out), {a, b}, "times", [](Node& self) {
    for (size_t k = 0; k < 2; ++k) {
      if (!self.input_needs_grad(k)) continue;
      Tensor& g = self.input_grad(k);
      const Tensor& other = self.input_value(1 - k);
      for (int64_t i = 0; i < g.numel(); ++i) g[i] += self.grad[i] * other[i];
    }
  });
}
Var total(const Var& a) {
  Real s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.value()[i];
  return make_result(Tensor::from({}, {s}), {a}, "total", [](Node& self) {
    Tensor& g = self.input_grad(0);
    for (int64_t i = 0; i < g.numel(); ++i) g[i] += self.grad[0];
  });
}
// y = a + b, declaring that its backward reads no value (ValueReads::none()).
Var plus(const Var& a, const Var& b) {
  Tensor out(a.shape());
  for (int64_t i = 0; i < out.numel(); ++i) out[i] = a.value()[i] + b.value()[i];
  return make_result(
      std::move(out), {a, b}, "plus",
      [](Node& self) {
        for (size_t k = 0; k < 2; ++k) {
          if (!self.input_needs_grad(k)) continue;
          Tensor& g = self.input_grad(k);
          for (int64_t i = 0; i < g.numel(); ++i) g[i] += self.grad[i];
        }
      },
      ValueReads::none());
}
// Whether a (2,) value was freed with its shape kept.
bool freed(const Node* n) { return n->value.numel() == 0 && n->value.shape() == Shape{2}; }
}  // namespace

TEST_CASE("a value used twice accumulates both gradient paths", "[autograd]") {
  Var x(Tensor::from({3}, {1, 2, 3}), true);
  Var y = total(times(x, x));  // sum x^2 -> dy/dx = 2x
  backward(y);
  REQUIRE(x.grad()[0] == Approx(2));
  REQUIRE(x.grad()[1] == Approx(4));
  REQUIRE(x.grad()[2] == Approx(6));
}

// times() written to the other side of the gradient contract: it overwrites a fresh buffer.
static Var times_writing(const Var& a, const Var& b) {
  Tensor out(a.shape());
  for (int64_t i = 0; i < out.numel(); ++i) out[i] = a.value()[i] * b.value()[i];
  return make_result(std::move(out), {a, b}, "times_writing", [](Node& self) {
    for (size_t k = 0; k < 2; ++k) {
      if (!self.input_needs_grad(k)) continue;
      const GradTarget t = self.input_grad_target(k);  // asked again for k = 1: the same node is no longer fresh
      const Tensor& other = self.input_value(1 - k);
      for (int64_t i = 0; i < t.grad->numel(); ++i)
        (*t.grad)[i] = (t.fresh ? 0 : (*t.grad)[i]) + self.grad[i] * other[i];
    }
  });
}

TEST_CASE("the gradient contract: a buffer is fresh (uninitialised) only before its first writer, and input_grad zero-fills "
          "it", "[autograd]") {
  Var x(Tensor::from({2}, {1, 2}), true);
  GradTarget first = x.node()->grad_target();
  CHECK(first.fresh);
  CHECK(first.grad->shape() == Shape{2});
  (*first.grad)[0] = 5;
  (*first.grad)[1] = 6;
  GradTarget second = x.node()->grad_target();
  CHECK_FALSE(second.fresh);
  CHECK(second.grad == first.grad);
  CHECK((*second.grad)[1] == 6);  // kept, to be added to

  Var y(Tensor::from({3}, {1, 2, 3}), true);
  { Tensor junk({3}, 7); }  // freed into the buffer cache, where y's gradient buffer is taken from next
  Tensor& zeros = y.node()->grad_buffer();
  for (int64_t i = 0; i < 3; ++i) CHECK(zeros[i] == 0);
}

TEST_CASE("an op whose inputs are one node writes the fresh buffer once and adds the second path", "[autograd]") {
  Var x(Tensor::from({3}, {1, 2, 3}), true);
  backward(total(times_writing(x, x)));  // d(sum x^2)/dx = 2x
  CHECK(x.grad()[0] == 2);
  CHECK(x.grad()[1] == 4);
  CHECK(x.grad()[2] == 6);
  backward(total(times_writing(x, x)));  // a second backward adds: the buffer is not fresh
  CHECK(x.grad()[2] == 12);
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[autograd]") {
  Var x(Tensor::from({2}, {1, 2}), true);
  backward(total(x));
  backward(total(x));
  REQUIRE(x.grad()[0] == Approx(2));
  x.zero_grad();
  REQUIRE(x.grad()[0] == 0);
}

TEST_CASE("constants get no gradient and record no graph", "[autograd]") {
  Var c(Tensor::from({2}, {1, 2}), false);
  Var x(Tensor::from({2}, {3, 4}), true);
  Var y = times(c, x);
  REQUIRE(y.requires_grad());
  REQUIRE(y.node()->inputs.size() == 2);
  Var z = times(c, c);
  REQUIRE_FALSE(z.requires_grad());
  REQUIRE(z.node()->inputs.empty());
  backward(total(y));
  REQUIRE_FALSE(c.has_grad());
  REQUIRE(x.grad()[1] == Approx(2));
}

TEST_CASE("NoGradGuard records nothing and restores the previous mode", "[autograd]") {
  Var x(Tensor::from({2}, {1, 2}), true);
  {
    NoGradGuard guard;
    REQUIRE_FALSE(grad_enabled());
    Var y = times(x, x);
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.node()->inputs.empty());
    REQUIRE_FALSE(static_cast<bool>(y.node()->backward));
  }
  REQUIRE(grad_enabled());
}

TEST_CASE("backward releases the graph and intermediate gradients", "[autograd]") {
  Var x(Tensor::from({2}, {1, 2}), true);
  Var h = times(x, x);
  Var kept = times(h, x);
  kept.retain_grad();
  Var y = total(kept);
  backward(y);
  REQUIRE(h.node()->inputs.empty());
  REQUIRE_FALSE(static_cast<bool>(h.node()->backward));
  REQUIRE(y.node()->inputs.empty());
  REQUIRE_FALSE(h.has_grad());      // intermediate: freed
  REQUIRE(kept.has_grad());         // retained on request
  REQUIRE(x.has_grad());            // leaf: kept
  REQUIRE(x.grad()[1] == Approx(3 * 4));  // d(x^3)/dx = 3x^2
}

TEST_CASE("a deep chain does not overflow the stack", "[autograd]") {
  Var x(Tensor::from({1}, {1}), true);
  Var one(Tensor::from({1}, {1}), false);
  Var y = x;
  for (int i = 0; i < 100000; ++i) y = times(y, one);
  backward(total(y));
  REQUIRE(x.grad()[0] == Approx(1));
}

TEST_CASE("backward refuses a non-scalar root", "[autograd]") {
  Var x(Tensor::from({2}, {1, 2}), true);
  Var y = times(x, x);
  REQUIRE_THROWS_AS(backward(y), ShapeError);
}

TEST_CASE("tensor shape errors name the shapes", "[tensor]") {
  Tensor t({2, 3});
  REQUIRE_THROWS_WITH(t.reshape_({4, 2}), Catch::Contains("(2, 3)") && Catch::Contains("(4, 2)"));
  REQUIRE_THROWS_AS(Tensor({2, -1}), ShapeError);
  REQUIRE_THROWS_WITH(Tensor::from({2, 2}, {1, 2, 3}), Catch::Contains("(2, 2)"));
}

TEST_CASE("tensor Eigen views alias the storage", "[tensor]") {
  Tensor t({2, 3, 4});
  t.batch(1)(2, 3) = 7;
  REQUIRE(t[1 * 12 + 2 * 4 + 3] == 7);
  REQUIRE(t.matrix().rows() == 6);
  REQUIRE(t.matrix()(5, 3) == 7);
  REQUIRE(t.batch_count() == 2);
}

TEST_CASE("a value no backward reads is freed, its shape kept, when its last Var goes, and one a backward reads, "
          "or a Var still holds, is kept",
          "[autograd][memory]") {
  Var x(Tensor::from({2}, {1, 2}), true);
  Var y, a, held;
  {
    a = plus(x, x);          // read by times below: kept
    Var t = times(a, x);     // read by its own backward (times reads every value): kept
    Var b = plus(t, x);      // read by no backward (plus reads nothing): freed when b goes
    Var c = plus(b, x);      // read by nobody: freed when c goes
    held = plus(x, x);       // read by nobody, but held below
    Var d = plus(held, x);   // read by nobody: freed when d goes
    y = total(plus(c, d));   // plus(c, d) is read by total (which reads every value): kept
    REQUIRE(b.value().numel() == 2);  // a Var holds it still
  }
  const Node* sum = y.node()->inputs[0].get();
  const Node* c = sum->inputs[0].get();
  const Node* b = c->inputs[0].get();
  const Node* t = b->inputs[0].get();
  const Node* d = sum->inputs[1].get();
  CHECK(freed(b));
  CHECK_FALSE(freed(a.node()));
  CHECK_FALSE(freed(t));
  CHECK(freed(c));
  CHECK_FALSE(freed(sum));
  CHECK(freed(d));
  CHECK_FALSE(freed(held.node()));
  held = Var();  // its last Var goes by assignment: now it is freed
  CHECK(freed(d->inputs[0].get()));
  backward(y);  // y = Σ (2x·x + x + x) + (2x + x): dy/dx = 4x + 5
  CHECK(x.grad()[0] == 9);
  CHECK(x.grad()[1] == 13);
}

TEST_CASE("values are freed only inside a recorded graph: not leaves, not after backward, and not while a Var "
          "holds one whose consumers went without a backward",
          "[autograd][memory]") {
  Var x(Tensor::from({2}, {1, 2}), true);
  Var p = plus(x, x), q = p;
  {
    Var consumer = plus(p, x);  // recorded, then gone without a backward: p's edge goes with it
  }
  p = Var();
  CHECK_FALSE(freed(q.node()));  // q still holds it
  Var r = plus(x, x), r2 = r;
  Var y = total(plus(r, x));
  backward(y);
  r2 = Var();
  CHECK_FALSE(freed(r.node()));  // the graph is released: r holds a plain value
  CHECK_FALSE(freed(x.node()));
}

TEST_CASE("ValueReads names 32 inputs: the values of inputs past the 32nd count as read and are kept",
          "[autograd][memory]") {
  Var x(Tensor::from({2}, {1, 2}), true);
  std::vector<Var> parts;
  for (int i = 0; i < 34; ++i) parts.push_back(plus(x, x));
  Var joined = make_result(
      Tensor({2}), parts, "gather",
      [](Node& self) {
        for (size_t k = 0; k < self.inputs.size(); ++k) self.input_grad(k)[0] += self.grad[0];
      },
      ValueReads::none());
  std::vector<const Node*> nodes;
  for (const Var& p : parts) nodes.push_back(p.node());
  parts.clear();
  CHECK(freed(nodes[0]));
  CHECK(freed(nodes[31]));
  CHECK_FALSE(freed(nodes[32]));
  CHECK_FALSE(freed(nodes[33]));
}
