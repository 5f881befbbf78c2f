#pragma once
// Finite-difference gradient checking: the way to know that a new op or layer
// has the right backward, in one call.
//
//   auto r = attnlab::gradcheck([](const std::vector<Var>& in) { return my_op(in[0], in[1]); }, {a, b});
//   if (!r.ok) std::cerr << r.message() << "\n";
//
// fn maps the inputs to an output Var of any shape. gradcheck reduces the
// output to a scalar through a fixed random projection L = sum(out * P), so
// every output element's gradient is exercised with a different weight, runs
// backward() once, and compares dL/dx with the central difference
// (L(x + h) - L(x - h)) / (x_plus - x_minus) for every element of every input
// that requires a gradient. The denominator is the difference of the values
// actually stored, so rounding of x ± h to Real does not count as error.
//
// fn must be deterministic (re-seed any dropout inside it) and smooth near the
// inputs (no ReLU kink within h of an input). Inputs are restored afterwards;
// their gradient buffers hold dL/dx of the projected loss.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/autograd.h"
#include "framework/random.h"
#include "framework/real.h"

namespace attnlab {

// Defaults follow Real, the scalar type this build of the engine computes in.
//
// float64: with h = 1e-6 the truncation error is O(h^2) ~ 1e-12 and the
// rounding error ~ 1e-16 / 1e-6 = 1e-10, so rtol 1e-6 (absolute floor 1e-8)
// leaves orders of magnitude of headroom for a correct backward while a
// dropped or doubled term fails.
//
// float32: machine epsilon is ~1.2e-7, so the forward's rounding error in L,
// divided by 2h, dominates unless h is large: with h = 1e-2 it is about
// 1e-7 * |L| / 2e-2 ~ 5e-6 * |L|, and truncation h^2/6 * f''' ~ 2e-5 * f'''.
// rtol 1e-2 with an absolute floor of 1e-3 keeps a correct op of a few
// thousand elements well inside, and still fails a backward off by 10% or
// more (a missing term or a wrong factor). Check in the float64 build
// (attnlab::attnlab_f64) when you need a tighter bound.
struct GradcheckOptions {
#ifdef ATTNLAB_DOUBLE
  double step = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-8;
#else
  double step = 1e-2;
  double rtol = 1e-2;
  double atol = 1e-3;
#endif
  uint64_t seed = 1234;  // of the random projection P (uniform in [-1, 1])
};

struct GradcheckResult {
  bool ok = true;
  // max over elements of |analytic - numeric| / max(|analytic|, |numeric|, atol / rtol);
  // ok means it is at most rtol.
  double max_rel_error = 0;
  std::string worst;     // "input 1 [17]: analytic .., numeric .."
  int64_t checked = 0;   // elements compared
  std::string message() const;  // "gradcheck ok|FAILED: max relative error .. at .."
};

using GradcheckFn = std::function<Var(const std::vector<Var>&)>;

// Throws ValueError when no input requires a gradient, when fn returns an
// undefined Var, or when options are not positive and finite.
GradcheckResult gradcheck(const GradcheckFn& fn, std::vector<Var> inputs, const GradcheckOptions& options = {});

// The second derivative, as gradcheck checks the first: the exact
// Hessian-vector product Hv of L = sum(fn(inputs) * P) (framework/hessian.h)
// along a random direction v against the central difference of gradients,
// (∇L(x + h v) − ∇L(x − h v)) / 2h, for every element of every input that
// requires a gradient. "input k" in the result counts those inputs only.
GradcheckResult hvpcheck(const GradcheckFn& fn, std::vector<Var> inputs, const GradcheckOptions& options = {});

// A tensor of the given shape, uniform in [lo, hi): inputs for a check.
Tensor uniform_tensor(Shape shape, Rng& rng, double lo = -1.0, double hi = 1.0);

}  // namespace attnlab
