#pragma once
// Finite-difference gradient checking for the float64 build of the engine.
//
// The function under test maps some input Vars to an output Var of any shape.
// We reduce the output to a scalar through a fixed random projection
// L = sum(out * P), so that every output element's gradient is exercised with
// a different weight, then compare dL/dx from backward() with central
// differences (L(x + h) - L(x - h)) / 2h for every input element.
//
// In float64 with h = 1e-6 the truncation error is O(h^2) ~ 1e-12 and the
// rounding error ~ 1e-16 / 1e-6 = 1e-10, so a tolerance of 1e-6 (relative,
// with an absolute floor of 1e-8) leaves orders of magnitude of headroom for
// a correct backward while a dropped or doubled term (an error of the size of
// that term) fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "framework/autograd.h"
#include "framework/ops/ops.h"
#include "framework/random.h"

namespace attnlab::testing {

struct GradcheckOptions {
  double step = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-8;
};

struct GradcheckResult {
  double max_rel_error = 0;  // max |analytic - numeric| / max(|analytic|, |numeric|, atol/rtol)
  std::string worst;         // "input 1 [17]: analytic .. numeric .."
  bool ok = true;
};

inline Tensor random_tensor(Shape shape, Rng& rng, double lo = -1.0, double hi = 1.0) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(lo, hi));
  return t;
}

using GradFn = std::function<Var(const std::vector<Var>&)>;

// Checks the gradient of fn with respect to every input that requires a gradient.
inline GradcheckResult gradcheck(const GradFn& fn, std::vector<Var> inputs, uint64_t seed = 1234,
                                 GradcheckOptions opt = {}) {
  // Analytic gradients.
  for (Var& v : inputs) v.zero_grad();
  Var out = fn(inputs);
  Rng rng(seed);
  Tensor projection = random_tensor(out.shape(), rng);
  auto project = [&](const Var& o) {
    double s = 0;
    for (int64_t i = 0; i < o.numel(); ++i) s += static_cast<double>(o.value()[i]) * projection[i];
    return s;
  };
  Var loss = sum(mul(out, Var(projection)));
  backward(loss);

  GradcheckResult result;
  NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Var& x = inputs[k];
    if (!x.requires_grad()) continue;
    Tensor analytic = x.has_grad() ? x.grad() : Tensor(x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) {
      Real saved = x.value()[i];
      x.value()[i] = saved + static_cast<Real>(opt.step);
      double plus = project(fn(inputs));
      x.value()[i] = saved - static_cast<Real>(opt.step);
      double minus = project(fn(inputs));
      x.value()[i] = saved;
      double numeric = (plus - minus) / (2 * opt.step);
      double a = analytic[i];
      double err = std::abs(a - numeric);
      double rel = err / std::max({std::abs(a), std::abs(numeric), opt.atol / opt.rtol});
      if (rel > result.max_rel_error) {
        result.max_rel_error = rel;
        result.worst = "input " + std::to_string(k) + " [" + std::to_string(i) + "]: analytic " +
                       std::to_string(a) + ", numeric " + std::to_string(numeric);
      }
    }
  }
  result.ok = result.max_rel_error <= opt.rtol;
  return result;
}

// Catch2 assertion with the worst element in the failure message.
#define ATTNLAB_REQUIRE_GRADCHECK(result)            \
  do {                                               \
    auto gc_result_ = (result);                      \
    INFO("max relative error " << gc_result_.max_rel_error << " at " << gc_result_.worst); \
    REQUIRE(gc_result_.ok);                          \
  } while (0)

}  // namespace attnlab::testing
