// Elementwise ops: broadcasting binary ops, unary maths, masking.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_pd, GCC bug 105593) when Eigen vectorises; silence it here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "framework/ops/elementwise.h"

#include <cmath>
#include <limits>

#include "framework/ops/broadcast.h"
#include "framework/ops/reduce.h"

namespace attnlab {
namespace detail {

BroadcastPlan make_broadcast_plan(const Shape& a, const Shape& b, const char* op) {
  BroadcastPlan p;
  p.out_shape = broadcast_shape(a, b, op);
  p.numel = shape_numel(p.out_shape);
  p.a_full = shape_numel(a) == p.numel;
  p.b_full = shape_numel(b) == p.numel;
  if (p.numel <= 1) return p;

  // Per output dim, each operand's contiguous stride, or 0 where it is
  // missing or of size 1 (broadcast).
  const size_t rank = p.out_shape.size();
  std::vector<int64_t> sa(rank, 0), sb(rank, 0);
  auto fill_strides = [rank](const Shape& s, std::vector<int64_t>& stride) {
    int64_t step = 1;
    for (size_t k = s.size(); k-- > 0;) {
      stride[rank - s.size() + k] = s[k] == 1 ? 0 : step;
      step *= s[k];
    }
  };
  fill_strides(a, sa);
  fill_strides(b, sb);
  // Drop size-1 dims; merge a dim into the one before it when both operands
  // step through the pair as through one dim.
  for (size_t k = 0; k < rank; ++k) {
    int64_t n = p.out_shape[k];
    if (n == 1) continue;
    if (!p.sizes.empty() && p.stride_a.back() == sa[k] * n && p.stride_b.back() == sb[k] * n) {
      p.sizes.back() *= n;
      p.stride_a.back() = sa[k];
      p.stride_b.back() = sb[k];
    } else {
      p.sizes.push_back(n);
      p.stride_a.push_back(sa[k]);
      p.stride_b.push_back(sb[k]);
    }
  }
  return p;
}

}  // namespace detail

using detail::BroadcastPlan;
using detail::for_each_run;
using detail::make_broadcast_plan;
using detail::parallel_chunks;
using detail::run_loop;

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    // Right-aligned: a missing leading dim acts as size 1.
    int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      throw ShapeError(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[k] = da == 1 ? db : da;
  }
  return out;
}

namespace {

// out = f(a, b) elementwise under the plan.
template <class F>
Tensor binary_forward(const BroadcastPlan& p, const Tensor& a, const Tensor& b, F f) {
  Tensor out = Tensor::uninitialized(p.out_shape);
  const Real* pa = a.data();
  const Real* pb = b.data();
  Real* po = out.data();
  for_each_run(p, true, [&](int64_t o, int64_t ia, int64_t ib, int64_t n, int64_t sa, int64_t sb) {
    Real* y = po + o;
    run_loop(pa + ia, pb + ib, n, sa, sb, [&](int64_t k, Real x, Real z) { y[k] = f(x, z); });
  });
  return out;
}

// target += gfn(g, a, b) summed back to the target operand's shape
// (which = 0: a, 1: b), or target = ... with overwrite set (only for a target
// of the output's shape, whose every element one run writes). Parallel only
// when the target has the output's shape (no two runs touch the same element);
// otherwise runs are summed serially so the result does not depend on the
// thread count.
template <bool reads_values, bool overwrite = false, class G>
void binary_accumulate(const BroadcastPlan& p, int which, const Tensor& grad, const Tensor& a, const Tensor& b,
                       Tensor& target, G gfn) {
  const Real* pg = grad.data();
  const Real* pa = a.data();
  const Real* pb = b.data();
  Real* pt = target.data();
  const bool full = which == 0 ? p.a_full : p.b_full;
  for_each_run(p, full, [&](int64_t o, int64_t ia, int64_t ib, int64_t n, int64_t sa, int64_t sb) {
    const Real* g = pg + o;
    Real* t = pt + (which == 0 ? ia : ib);
    // An op that reads no value (add, sub: theirs may be freed) gets g in their
    // place, which every run may read, and ignores it.
    const Real* xa = reads_values ? pa + ia : g;
    const Real* xb = reads_values ? pb + ib : g;
    if ((which == 0 ? sa : sb) == 1) {
      if constexpr (overwrite)
        run_loop(xa, xb, n, sa, sb, [&](int64_t k, Real x, Real z) { t[k] = gfn(g[k], x, z); });
      else
        run_loop(xa, xb, n, sa, sb, [&](int64_t k, Real x, Real z) { t[k] += gfn(g[k], x, z); });
    } else {  // the target is constant along this run: sum the run into one element
      Real acc = 0;
      run_loop(xa, xb, n, sa, sb, [&](int64_t k, Real x, Real z) { acc += gfn(g[k], x, z); });
      if constexpr (overwrite)
        t[0] = acc;
      else
        t[0] += acc;
    }
  });
}

// The backward of a binary op for input `which`. An input of the output's shape
// whose gradient has no buffer yet (its first contribution, as for a residual
// stream) gets an uninitialised one that the op overwrites (the gradient
// contract, framework/autograd.h): no zero-fill and no read of zeros. A
// broadcast input (a bias) accumulates.
template <bool reads_values, class G>
void binary_backward(Node& self, const BroadcastPlan& p, int which, G gfn) {
  const Tensor& a = self.input_value(0);
  const Tensor& b = self.input_value(1);
  if (which == 0 ? p.a_full : p.b_full) {
    const GradTarget t = self.input_grad_target(static_cast<size_t>(which));
    if (t.fresh)
      binary_accumulate<reads_values, true>(p, which, self.grad, a, b, *t.grad, gfn);
    else
      binary_accumulate<reads_values>(p, which, self.grad, a, b, *t.grad, gfn);
    return;
  }
  binary_accumulate<reads_values>(p, which, self.grad, a, b, self.input_grad(static_cast<size_t>(which)), gfn);
}

// A binary op's backward in differentiable ops: dL/d(input `which`) at the
// output's shape, from a, b, the output and g (summed back to the input's
// shape by the caller).
using BinaryGraphGrad = Var (*)(int which, const Var& a, const Var& b, const Var& out, const Var& g);

// A broadcasting binary op: forward f(x, y); dL/da = ga(g, x, y), dL/db = gb(g, x, y);
// `graph` the same in Vars (second order). Without reads_values, ga and gb
// ignore x and y, and the inputs' values may be freed before backward (ValueReads).
template <bool reads_values, class F, class GA, class GB>
Var binary_op(const Var& a, const Var& b, const char* name, F f, GA ga, GB gb, BinaryGraphGrad graph) {
  BroadcastPlan plan = make_broadcast_plan(a.shape(), b.shape(), name);
  Tensor out = binary_forward(plan, a.value(), b.value(), f);
  Var r = make_result(std::move(out), {a, b}, name, [plan = std::move(plan), ga, gb](Node& self) {
    if (self.input_needs_grad(0)) binary_backward<reads_values>(self, plan, 0, ga);
    if (self.input_needs_grad(1)) binary_backward<reads_values>(self, plan, 1, gb);
  }, ValueReads{false, reads_values ? ~0u : 0u});
  if (records_second_order(r))
    r.node()->graph_backward = [graph](const std::vector<Var>& in, const Var& y, const Var& g) {
      std::vector<Var> grads(2);
      for (int k = 0; k < 2; ++k)
        if (in[static_cast<size_t>(k)].requires_grad())
          grads[static_cast<size_t>(k)] = sum_to(graph(k, in[0], in[1], y, g), in[static_cast<size_t>(k)].shape());
      return grads;
    };
  return r;
}

// The second-order form of a unary op: dx from x, the output y and g.
template <class G>
void attach_unary_graph(Var& r, G graph) {
  if (records_second_order(r))
    r.node()->graph_backward = [graph](const std::vector<Var>& in, const Var& y, const Var& g) {
      return std::vector<Var>{graph(in[0], y, g)};
    };
}

// A unary op written with Eigen array expressions, chunked across threads:
// forward y = f(x); backward dx += d(g, x, y) (all three are array segments).
template <class F, class D, class G>
Var unary_op(const Var& a, const char* name, F f, D d, G graph) {
  const Tensor& x = a.value();
  Tensor out = Tensor::uninitialized(x.shape());
  parallel_chunks(x.numel(), [&](int64_t lo, int64_t hi) {
    out.flat().segment(lo, hi - lo).array() = f(x.flat().segment(lo, hi - lo).array());
  });
  Var r = make_result(std::move(out), {a}, name, [d](Node& self) {
    if (!self.input_needs_grad(0)) return;
    Tensor& gx = self.input_grad(0);
    const Tensor& xv = self.input_value(0);
    parallel_chunks(gx.numel(), [&](int64_t lo, int64_t hi) {
      const int64_t n = hi - lo;
      gx.flat().segment(lo, n).array() +=
          d(self.grad.flat().segment(lo, n).array(), xv.flat().segment(lo, n).array(),
            self.value.flat().segment(lo, n).array());
    });
  });
  attach_unary_graph(r, graph);
  return r;
}

// 1 where x > 0, else 0: ReLU's slope, a constant of the graph.
Var positive_step(const Var& x) {
  Tensor step = Tensor::uninitialized(x.shape());
  step.flat().array() = (x.value().flat().array() > Real(0)).template cast<Real>();
  return Var(std::move(step));
}

}  // namespace

Var add(const Var& a, const Var& b) {
  return binary_op<false>(
      a, b, "add", [](Real x, Real y) { return x + y; }, [](Real g, Real, Real) { return g; },
      [](Real g, Real, Real) { return g; },
      [](int, const Var&, const Var&, const Var&, const Var& g) { return g; });
}

Var sub(const Var& a, const Var& b) {
  return binary_op<false>(
      a, b, "sub", [](Real x, Real y) { return x - y; }, [](Real g, Real, Real) { return g; },
      [](Real g, Real, Real) { return -g; },
      [](int which, const Var&, const Var&, const Var&, const Var& g) { return which == 0 ? g : neg(g); });
}

Var mul(const Var& a, const Var& b) {
  return binary_op<true>(
      a, b, "mul", [](Real x, Real y) { return x * y; }, [](Real g, Real, Real y) { return g * y; },
      [](Real g, Real x, Real) { return g * x; },
      [](int which, const Var& a, const Var& b, const Var&, const Var& g) { return mul(g, which == 0 ? b : a); });
}

Var div(const Var& a, const Var& b) {
  return binary_op<true>(
      a, b, "div", [](Real x, Real y) { return x / y; }, [](Real g, Real, Real y) { return g / y; },
      [](Real g, Real x, Real y) { return -g * x / (y * y); },
      [](int which, const Var&, const Var& b, const Var& y, const Var& g) {
        return which == 0 ? div(g, b) : neg(div(mul(g, y), b));  // -g·a/b² = -g·y/b
      });
}

Var neg(const Var& a) {
  return unary_op(
      a, "neg", [](const auto& x) { return -x; }, [](const auto& g, const auto&, const auto&) { return -g; },
      [](const Var&, const Var&, const Var& g) { return neg(g); });
}

Var scale(const Var& a, Real s) {
  return unary_op(
      a, "scale", [s](const auto& x) { return x * s; },
      [s](const auto& g, const auto&, const auto&) { return g * s; },
      [s](const Var&, const Var&, const Var& g) { return scale(g, s); });
}

Var add_scalar(const Var& a, Real s) {
  return unary_op(
      a, "add_scalar", [s](const auto& x) { return x + s; },
      [](const auto& g, const auto&, const auto&) { return g; },
      [](const Var&, const Var&, const Var& g) { return g; });
}

Var exp(const Var& a) {
  return unary_op(
      a, "exp", [](const auto& x) { return x.exp(); },
      [](const auto& g, const auto&, const auto& y) { return g * y; },
      [](const Var&, const Var& y, const Var& g) { return mul(g, y); });
}

Var log(const Var& a) {
  return unary_op(
      a, "log", [](const auto& x) { return x.log(); },
      [](const auto& g, const auto& x, const auto&) { return g / x; },
      [](const Var& x, const Var&, const Var& g) { return div(g, x); });
}

Var sqrt(const Var& a) {
  return unary_op(
      a, "sqrt", [](const auto& x) { return x.sqrt(); },
      [](const auto& g, const auto&, const auto& y) { return g * Real(0.5) / y; },
      [](const Var&, const Var& y, const Var& g) { return scale(div(g, y), Real(0.5)); });
}

Var tanh(const Var& a) {
  return unary_op(
      a, "tanh", [](const auto& x) { return x.tanh(); },
      [](const auto& g, const auto&, const auto& y) { return g * (Real(1) - y.square()); },
      [](const Var&, const Var& y, const Var& g) { return sub(g, mul(g, mul(y, y))); });
}

Var relu(const Var& a) {
  // The derivative at exactly 0 is taken as 0, as torch does.
  return unary_op(
      a, "relu", [](const auto& x) { return x.max(Real(0)); },
      [](const auto& g, const auto& x, const auto&) { return g * (x > Real(0)).template cast<Real>(); },
      [](const Var& x, const Var&, const Var& g) { return mul(g, positive_step(x)); });
}

namespace {

constexpr Real kInvSqrt2 = Real(0.70710678118654752440);
constexpr Real kInvSqrt2Pi = Real(0.39894228040143267794);
Real normal_cdf(Real v) { return Real(0.5) * (Real(1) + std::erf(v * kInvSqrt2)); }
Real normal_pdf(Real v) { return kInvSqrt2Pi * std::exp(Real(-0.5) * v * v); }

// GELU's slope Phi(x) + x phi(x) as an op (its second order); its own slope is
// phi(x) (2 - x²). It has no graph backward (no third derivatives).
// erf has no Eigen array form in Eigen/Core, hence scalar loops.
Var gelu_slope(const Var& a) {
  const Tensor& x = a.value();
  Tensor out = Tensor::uninitialized(x.shape());
  parallel_chunks(x.numel(), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = normal_cdf(x[i]) + x[i] * normal_pdf(x[i]);
  });
  return make_result(std::move(out), {a}, "gelu_slope", [](Node& self) {
    if (!self.input_needs_grad(0)) return;
    Tensor& gx = self.input_grad(0);
    const Tensor& xv = self.input_value(0);
    parallel_chunks(gx.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) gx[i] += self.grad[i] * normal_pdf(xv[i]) * (Real(2) - xv[i] * xv[i]);
    });
  });
}

}  // namespace

Var gelu(const Var& a) {
  // y = x Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2; dy/dx = Phi(x) + x phi(x).
  const Tensor& x = a.value();
  Tensor out = Tensor::uninitialized(x.shape());
  parallel_chunks(x.numel(), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = x[i] * normal_cdf(x[i]);
  });
  Var r = make_result(std::move(out), {a}, "gelu", [](Node& self) {
    if (!self.input_needs_grad(0)) return;
    Tensor& gx = self.input_grad(0);
    const Tensor& xv = self.input_value(0);
    parallel_chunks(gx.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) gx[i] += self.grad[i] * (normal_cdf(xv[i]) + xv[i] * normal_pdf(xv[i]));
    });
  });
  attach_unary_graph(r, [](const Var& x, const Var&, const Var& g) { return mul(g, gelu_slope(x)); });
  return r;
}

Var masked_fill(const Var& a, const Tensor& mask, Real value) {
  BroadcastPlan plan = make_broadcast_plan(a.shape(), mask.shape(), "masked_fill");
  if (plan.out_shape != a.shape())
    throw ShapeError("masked_fill: mask " + mask.shape_str() + " does not broadcast to the input's shape " +
                     a.value().shape_str());
  const Tensor& x = a.value();
  Tensor out = binary_forward(plan, x, mask, [value](Real v, Real m) { return m != 0 ? value : v; });
  // The mask is copied into the closure: the caller's may not outlive the graph.
  Var r = make_result(std::move(out), {a}, "masked_fill", [plan = std::move(plan), mask](Node& self) {
    if (!self.input_needs_grad(0)) return;
    Tensor& gx = self.input_grad(0);
    const Real* pg = self.grad.data();
    const Real* pm = mask.data();
    Real* pt = gx.data();
    // a has the output's shape, so every run writes its own elements.
    for_each_run(plan, true, [&](int64_t o, int64_t, int64_t im, int64_t n, int64_t, int64_t sm) {
      const Real* g = pg + o;
      Real* t = pt + o;
      run_loop(g, pm + im, n, 1, sm, [&](int64_t k, Real gk, Real m) { t[k] += m != 0 ? Real(0) : gk; });
    });
  });
  attach_unary_graph(r, [mask](const Var&, const Var&, const Var& g) { return masked_fill(g, mask, 0); });
  return r;
}

Tensor causal_mask(int64_t t_q, int64_t t_k) {
  Tensor mask({t_q, t_k});
  const int64_t shift = t_k - t_q;  // with a cache of earlier keys, query i sits at key position i + shift
  for (int64_t i = 0; i < t_q; ++i)
    for (int64_t j = std::max<int64_t>(0, i + shift + 1); j < t_k; ++j) mask[i * t_k + j] = 1;
  return mask;
}

}  // namespace attnlab
