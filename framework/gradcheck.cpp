#include "framework/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "framework/error.h"
#include "framework/hessian.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"

namespace attnlab {
namespace {

void check_options(const GradcheckOptions& o) {
  auto positive = [](double v, const char* what) {
    if (!(v > 0) || !std::isfinite(v))
      throw ValueError(std::string("gradcheck: ") + what + " must be > 0 and finite, got " + exact_text(v));
  };
  positive(o.step, "step");
  positive(o.rtol, "rtol");
  positive(o.atol, "atol");
}

// L = sum(out * P), accumulated in double so the sum adds no float32 rounding of its own.
double projected(const Var& out, const Tensor& projection) {
  if (!out.defined()) throw ValueError("gradcheck: fn returned an undefined Var");
  if (out.shape() != projection.shape())
    throw ValueError("gradcheck: fn's output shape changed from " + shape_str(projection.shape()) + " to " +
                     shape_str(out.shape()) + " between calls");
  double s = 0;
  for (int64_t i = 0; i < out.numel(); ++i) s += static_cast<double>(out.value()[i]) * projection[i];
  return s;
}

// The central difference of L along element i of x, over the perturbation actually stored.
double numeric_derivative(const GradcheckFn& fn, const std::vector<Var>& inputs, Var& x, int64_t i,
                          const Tensor& projection, double step) {
  const Real saved = x.value()[i];
  const Real up = static_cast<Real>(saved + step);
  const Real down = static_cast<Real>(saved - step);
  x.value()[i] = up;
  const double plus = projected(fn(inputs), projection);
  x.value()[i] = down;
  const double minus = projected(fn(inputs), projection);
  x.value()[i] = saved;
  double width = static_cast<double>(up) - static_cast<double>(down);
  // An infinite input (a -inf mask entry) does not move: the nominal width keeps its difference 0, not NaN.
  if (!std::isfinite(width) || width == 0) width = 2 * step;
  return (plus - minus) / width;
}

std::string element_text(size_t k, int64_t i, double analytic, double numeric) {
  std::ostringstream s;
  s.precision(9);
  s << "input " << k << " [" << i << "]: analytic " << analytic << ", numeric " << numeric;
  return s.str();
}

// One element's relative error into the result: counted, and kept as the
// worst when it is (a NaN on either side is the worst error there is).
void compare(GradcheckResult& result, size_t k, int64_t i, double analytic, double numeric, double floor) {
  double rel = std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), floor});
  if (std::isnan(rel)) rel = INFINITY;
  ++result.checked;
  if (rel > result.max_rel_error) {
    result.max_rel_error = rel;
    result.worst = element_text(k, i, analytic, numeric);
  }
}

}  // namespace

Tensor uniform_tensor(Shape shape, Rng& rng, double lo, double hi) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(lo, hi));
  return t;
}

GradcheckResult gradcheck(const GradcheckFn& fn, std::vector<Var> inputs, const GradcheckOptions& options) {
  check_options(options);
  if (std::none_of(inputs.begin(), inputs.end(), [](const Var& v) { return v.defined() && v.requires_grad(); }))
    throw ValueError("gradcheck: no input requires a gradient, so there is nothing to check");

  // Analytic gradients of the projected loss.
  for (Var& v : inputs)
    if (v.defined()) v.zero_grad();
  Var out = fn(inputs);
  if (!out.defined()) throw ValueError("gradcheck: fn returned an undefined Var");
  Rng rng(options.seed);
  const Tensor projection = uniform_tensor(out.shape(), rng);
  backward(sum(mul(out, Var(projection))));

  GradcheckResult result;
  NoGradGuard no_grad;
  const double floor = options.atol / options.rtol;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Var& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    const Tensor analytic = x.has_grad() ? x.grad() : Tensor(x.shape());  // never reached: zero
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double numeric = numeric_derivative(fn, inputs, x, i, projection, options.step);
      compare(result, k, i, analytic[i], numeric, floor);
    }
  }
  result.ok = result.max_rel_error <= options.rtol;
  return result;
}

namespace {

// dL/dx for every input that requires one (zeros where L does not reach it).
std::vector<Tensor> gradients_at(const GradcheckFn& fn, std::vector<Var>& inputs, const Tensor& projection) {
  for (Var& v : inputs)
    if (v.defined()) v.grad() = Tensor();
  Var loss = sum(mul(fn(inputs), Var(projection)));
  if (loss.requires_grad()) backward(loss);
  std::vector<Tensor> grads;
  for (Var& v : inputs)
    if (v.defined() && v.requires_grad()) grads.push_back(v.has_grad() ? v.grad() : Tensor(v.shape()));
  return grads;
}

// Moves every input that requires a gradient by step·direction.
void move_inputs(std::vector<Var>& inputs, const std::vector<Tensor>& direction, double step) {
  size_t k = 0;
  for (Var& v : inputs)
    if (v.defined() && v.requires_grad()) v.value().flat() += static_cast<Real>(step) * direction[k++].flat();
}

}  // namespace

GradcheckResult hvpcheck(const GradcheckFn& fn, std::vector<Var> inputs, const GradcheckOptions& options) {
  check_options(options);
  std::vector<Var> params;
  for (const Var& v : inputs)
    if (v.defined() && v.requires_grad()) params.push_back(v);
  if (params.empty()) throw ValueError("hvpcheck: no input requires a gradient, so there is nothing to check");
  Rng rng(options.seed);
  const Tensor projection = uniform_tensor(fn(inputs).shape(), rng);
  std::vector<Tensor> direction;
  for (const Var& p : params) direction.push_back(uniform_tensor(p.shape(), rng));
  const std::vector<Tensor> analytic =
      HessianVectorProduct([&] { return sum(mul(fn(inputs), Var(projection))); }, params).apply(direction);

  // The central difference of the gradient along the direction.
  std::vector<Tensor> saved;
  for (const Var& p : params) saved.push_back(p.value());
  move_inputs(inputs, direction, options.step);
  const std::vector<Tensor> plus = gradients_at(fn, inputs, projection);
  move_inputs(inputs, direction, -2 * options.step);
  const std::vector<Tensor> minus = gradients_at(fn, inputs, projection);
  for (size_t k = 0; k < params.size(); ++k) params[k].value() = saved[k];

  GradcheckResult result;
  const double floor = options.atol / options.rtol;
  for (size_t k = 0; k < params.size(); ++k)
    for (int64_t i = 0; i < params[k].numel(); ++i) {
      const double numeric = (static_cast<double>(plus[k][i]) - minus[k][i]) / (2 * options.step);
      compare(result, k, i, analytic[k][i], numeric, floor);
    }
  result.ok = result.max_rel_error <= options.rtol;
  return result;
}

std::string GradcheckResult::message() const {
  std::ostringstream s;
  s << (ok ? "gradcheck ok" : "gradcheck FAILED") << ": max relative error " << max_rel_error << " over "
    << checked << " elements";
  if (!worst.empty()) s << ", worst at " << worst;
  return s.str();
}

}  // namespace attnlab
