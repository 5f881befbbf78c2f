// Reductions: sum and mean, of everything or along one axis.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_pd, GCC bug 105593) when Eigen vectorises; silence it here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "framework/ops/reduce.h"

#include "framework/ops/broadcast.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/shape.h"

namespace attnlab {
namespace {

// Sums x[0, n) in an order fixed by n alone, in double. Eigen's .sum() is not
// used: it peels leading elements up to the first aligned address, so its
// rounding (and thus a run's bits) would vary with where the allocator put x.
// Sixteen independent lanes let the compiler vectorise without reassociating.
double ordered_sum(const Real* x, int64_t n) {
  constexpr int kLanes = 16;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(x[i + l]);
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(x[i]);
  for (int l = 0; l < kLanes; ++l) s += lane[l];
  return s;
}

// sum(a) * factor -> shape (); backward spreads g * factor to every element.
Var reduce_all(const Var& a, Real factor, const char* name) {
  const double total = ordered_sum(a.value().data(), a.numel());
  Tensor out = Tensor::from({}, {static_cast<Real>(total * static_cast<double>(factor))});
  Var r = make_result(std::move(out), {a}, name, [factor](Node& self) {
    if (self.input_needs_grad(0)) self.input_grad(0).flat().array() += self.grad[0] * factor;
  });
  if (records_second_order(r))
    r.node()->graph_backward = [factor](const std::vector<Var>& in, const Var&, const Var& g) {
      return std::vector<Var>{broadcast_to(scale(g, factor), in[0].shape())};
    };
  return r;
}

// Sum along one axis times factor. a is viewed as (outer, n, inner) and the
// result as (outer, inner): each output row adds n contiguous rows of a.
Var reduce_axis(const Var& a, int axis, bool keepdim, Real factor, const char* name) {
  const int rank = a.dim();
  const int ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank)
    throw ShapeError(std::string(name) + ": axis " + std::to_string(axis) + " out of range for shape " +
                     a.value().shape_str());
  const Shape& s = a.shape();
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < ax; ++k) outer *= s[static_cast<size_t>(k)];
  for (int k = ax + 1; k < rank; ++k) inner *= s[static_cast<size_t>(k)];
  const int64_t n = s[static_cast<size_t>(ax)];

  Shape out_shape = s;
  if (keepdim) out_shape[static_cast<size_t>(ax)] = 1;
  else out_shape.erase(out_shape.begin() + ax);
  Tensor out(out_shape);
  const Real* x = a.value().data();
  Real* y = out.data();
  const bool par = outer > 1 && a.numel() >= 2 * detail::kParallelGrain;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t o = 0; o < outer; ++o) {
    Real* yo = y + o * inner;
    for (int64_t k = 0; k < n; ++k) {
      const Real* xk = x + (o * n + k) * inner;
      for (int64_t i = 0; i < inner; ++i) yo[i] += xk[i];
    }
    for (int64_t i = 0; i < inner; ++i) yo[i] *= factor;
  }
  Var r = make_result(std::move(out), {a}, name, [outer, n, inner, factor, par](Node& self) {
    if (!self.input_needs_grad(0)) return;
    Real* gx = self.input_grad(0).data();
    const Real* g = self.grad.data();
#pragma omp parallel for schedule(static) if (par)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < n; ++k) {
        Real* gk = gx + (o * n + k) * inner;
        for (int64_t i = 0; i < inner; ++i) gk[i] += g[o * inner + i] * factor;
      }
  });
  if (records_second_order(r)) {
    Shape kept = s;  // the output's shape with the axis kept (size 1)
    kept[static_cast<size_t>(ax)] = 1;
    r.node()->graph_backward = [kept, factor](const std::vector<Var>& in, const Var&, const Var& g) {
      return std::vector<Var>{broadcast_to(scale(reshape(g, kept), factor), in[0].shape())};
    };
  }
  return r;
}

Real inverse_count(int64_t n) { return n > 0 ? Real(1) / static_cast<Real>(n) : Real(0); }

}  // namespace

Var sum(const Var& a) { return reduce_all(a, 1, "sum"); }

Var mean(const Var& a) {
  if (a.numel() == 0) throw ShapeError("mean: the input " + a.value().shape_str() + " is empty");
  return reduce_all(a, inverse_count(a.numel()), "mean");
}

Var sum(const Var& a, int axis, bool keepdim) { return reduce_axis(a, axis, keepdim, 1, "sum"); }

Var mean(const Var& a, int axis, bool keepdim) {
  const int rank = a.dim();
  const int ax = axis < 0 ? axis + rank : axis;
  const int64_t n = ax >= 0 && ax < rank ? a.shape()[static_cast<size_t>(ax)] : 1;  // bad axes throw below
  if (n == 0) throw ShapeError("mean: axis " + std::to_string(axis) + " of " + a.value().shape_str() + " is empty");
  return reduce_axis(a, axis, keepdim, inverse_count(n), "mean");
}

Var sum_to(const Var& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  if (broadcast_shape(a.shape(), shape, "sum_to") != a.shape())
    throw ShapeError("sum_to: " + shape_str(shape) + " does not broadcast to " + a.value().shape_str());
  Var r = a;
  while (r.dim() > static_cast<int>(shape.size())) r = sum(r, 0);  // leading dims the shape lacks
  for (int k = 0; k < r.dim(); ++k)
    if (shape[static_cast<size_t>(k)] == 1 && r.size(k) != 1) r = sum(r, k, /*keepdim=*/true);
  return r;
}

Var broadcast_to(const Var& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  return add(Var(Tensor(shape)), a);  // its gradient is sum_to, by add's backward
}

}  // namespace attnlab
