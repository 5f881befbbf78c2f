// attnlab::gradcheck (framework/gradcheck.h), the public gradient check, in
// the float32 build users link: its defaults (step 1e-2, rtol 1e-2, floor
// 1e-3) pass correct ops and fail wrong backwards. Each failing case is paired
// with the same op done right, so a gradcheck that always said "ok" or always
// said "failed" would fail one of them.
#include <catch2/catch.hpp>

#include "framework/error.h"
#include "framework/gradcheck.h"
#include "framework/ops/ops.h"

using namespace attnlab;

namespace {

// y = x^3 elementwise, with a backward of factor * 3x^2 * g: factor 1 is right.
Var cube(const Var& x, Real factor) {
  Tensor y(x.shape());
  for (int64_t i = 0; i < y.numel(); ++i) y[i] = x.value()[i] * x.value()[i] * x.value()[i];
  return make_result(std::move(y), {x}, "cube", [factor](Node& self) {
    if (!self.input_needs_grad(0)) return;
    const Tensor& x = self.input_value(0);
    Tensor& gx = self.input_grad(0);
    for (int64_t i = 0; i < gx.numel(); ++i) gx[i] += factor * 3 * x[i] * x[i] * self.grad[i];
  });
}

// y = a * b elementwise; with `forget_b` the backward gives b no gradient.
Var product(const Var& a, const Var& b, bool forget_b) {
  Tensor y(a.shape());
  for (int64_t i = 0; i < y.numel(); ++i) y[i] = a.value()[i] * b.value()[i];
  return make_result(std::move(y), {a, b}, "product", [forget_b](Node& self) {
    for (size_t k = 0; k < 2; ++k) {
      if (!self.input_needs_grad(k) || (k == 1 && forget_b)) continue;
      const Tensor& other = self.input_value(1 - k);
      Tensor& g = self.input_grad(k);
      for (int64_t i = 0; i < g.numel(); ++i) g[i] += other[i] * self.grad[i];
    }
  });
}

Var input(Shape shape, uint64_t seed) {
  Rng rng(seed);
  return Var(uniform_tensor(std::move(shape), rng), true);
}

}  // namespace

TEST_CASE("public gradcheck passes composed library ops in float32 with its default tolerances", "[gradcheck_public]") {
  Var x = input({3, 4}, 1), w = input({4, 5}, 2), gain = input({5}, 3), bias = input({5}, 4);
  auto fn = [](const std::vector<Var>& in) {
    return softmax(layer_norm(tanh(matmul(in[0], in[1])), in[2], in[3]));
  };
  GradcheckResult r = gradcheck(fn, {x, w, gain, bias});
  INFO(r.message());
  CHECK(r.ok);
  CHECK(r.checked == 12 + 20 + 5 + 5);  // every element of every input
}

TEST_CASE("public gradcheck fails a custom op whose backward is 10% too large and passes it when exact",
          "[gradcheck_public]") {
  Var x = input({2, 3}, 5);
  GradcheckResult right = gradcheck([](const std::vector<Var>& in) { return cube(in[0], 1); }, {x});
  INFO(right.message());
  CHECK(right.ok);

  GradcheckResult wrong = gradcheck([](const std::vector<Var>& in) { return cube(in[0], Real(1.1)); }, {x});
  INFO(wrong.message());
  CHECK_FALSE(wrong.ok);
  // analytic = 1.1 numeric, so the relative error is 0.1 / 1.1 wherever the gradient is above the floor.
  CHECK(wrong.max_rel_error == Approx(0.1 / 1.1).epsilon(0.02));
  CHECK(wrong.worst.rfind("input 0 [", 0) == 0);
}

TEST_CASE("public gradcheck fails a backward that forgets one input's gradient and names that input",
          "[gradcheck_public]") {
  Var a = input({4}, 6), b = input({4}, 7);
  GradcheckResult right = gradcheck([](const std::vector<Var>& in) { return product(in[0], in[1], false); }, {a, b});
  INFO(right.message());
  CHECK(right.ok);

  GradcheckResult wrong = gradcheck([](const std::vector<Var>& in) { return product(in[0], in[1], true); }, {a, b});
  INFO(wrong.message());
  CHECK_FALSE(wrong.ok);
  CHECK(wrong.max_rel_error == Approx(1.0));  // analytic 0 against a non-zero numeric
  CHECK(wrong.worst.rfind("input 1 [", 0) == 0);
}

TEST_CASE("public gradcheck skips inputs without a gradient and leaves every input's values as they were",
          "[gradcheck_public]") {
  Var x = input({3}, 8);
  Var c(Tensor::from({3}, {Real(0.5), Real(-2), Real(3)}), false);
  const Tensor x_before = x.value(), c_before = c.value();
  GradcheckResult r = gradcheck([](const std::vector<Var>& in) { return mul(cube(in[0], 1), in[1]); }, {x, c});
  INFO(r.message());
  CHECK(r.ok);
  CHECK(r.checked == 3);  // c does not require a gradient
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(x.value()[i] == x_before[i]);
    CHECK(c.value()[i] == c_before[i]);
  }
}

TEST_CASE("public gradcheck refuses a check with nothing to check or a non-positive step", "[gradcheck_public]") {
  Var c(Tensor({2}, 1), false);
  auto identity = [](const std::vector<Var>& in) { return in[0]; };
  CHECK_THROWS_AS(gradcheck(identity, {c}), ValueError);
  GradcheckOptions bad;
  bad.step = 0;
  CHECK_THROWS_AS(gradcheck(identity, {input({2}, 9)}, bad), ValueError);
}
