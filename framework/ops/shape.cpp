// Ops that move values without arithmetic: reshape, transpose, split, concat.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_pd, GCC bug 105593) when Eigen vectorises; silence it here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "framework/ops/shape.h"

#include <cstring>

#include "framework/ops/broadcast.h"

namespace attnlab {
namespace {

int normalize_axis(int axis, int rank, const char* op, const Shape& shape) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " out of range for shape " +
                     shape_str(shape));
  return a;
}

// Views a shape as (outer, shape[axis], inner) around one axis.
void around_axis(const Shape& s, int axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int k = 0; k < axis; ++k) outer *= s[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(axis) + 1; k < s.size(); ++k) inner *= s[k];
}

// Swaps axes a0 < a1 of src (shape viewed as (pre, n0, mid, n1, post)) into
// dst (pre, n1, mid, n0, post), assigning or adding. Parallel over dst's outer
// (pre, n1) rows: every dst element is written by one iteration.
struct SwapGeometry {
  int64_t pre, n0, mid, n1, post;
};

SwapGeometry swap_geometry(const Shape& s, int a0, int a1) {
  SwapGeometry g{1, s[static_cast<size_t>(a0)], 1, s[static_cast<size_t>(a1)], 1};
  for (int k = 0; k < a0; ++k) g.pre *= s[static_cast<size_t>(k)];
  for (int k = a0 + 1; k < a1; ++k) g.mid *= s[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(a1) + 1; k < s.size(); ++k) g.post *= s[k];
  return g;
}

void swap_axes(const SwapGeometry& g, const Real* src, Real* dst, bool accumulate) {
  const int64_t outer = g.pre * g.n1;
  const bool par = outer > 1 && g.pre * g.n0 * g.mid * g.n1 * g.post >= 2 * detail::kParallelGrain;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t pj = 0; pj < outer; ++pj) {
    const int64_t p = pj / g.n1, j = pj % g.n1;
    for (int64_t m = 0; m < g.mid; ++m)
      for (int64_t i = 0; i < g.n0; ++i) {
        const Real* s = src + (((p * g.n0 + i) * g.mid + m) * g.n1 + j) * g.post;
        Real* d = dst + (((p * g.n1 + j) * g.mid + m) * g.n0 + i) * g.post;
        if (accumulate) {
          for (int64_t q = 0; q < g.post; ++q) d[q] += s[q];
        } else {
          std::memcpy(d, s, static_cast<size_t>(g.post) * sizeof(Real));
        }
      }
  }
}

}  // namespace

Var reshape(const Var& a, Shape shape) {
  int inferred = -1;
  int64_t known = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == -1) {
      if (inferred >= 0)
        throw ShapeError("reshape: " + a.value().shape_str() + " to " + shape_str(shape) + ": more than one -1");
      inferred = static_cast<int>(k);
    } else if (shape[k] < 0) {
      throw ShapeError("reshape: " + a.value().shape_str() + " to " + shape_str(shape) + ": negative size");
    } else {
      known *= shape[k];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || a.numel() % known != 0)
      throw ShapeError("reshape: cannot infer the -1 in " + shape_str(shape) + " for " + a.value().shape_str() +
                       " (" + std::to_string(a.numel()) + " elements)");
    shape[static_cast<size_t>(inferred)] = a.numel() / known;
  }
  if (shape_numel(shape) != a.numel())
    throw ShapeError("reshape: cannot reshape " + a.value().shape_str() + " (" + std::to_string(a.numel()) +
                     " elements) to " + shape_str(shape));
  // Tensors own their storage, so the result is a copy with the new shape.
  Var r = make_result(a.value().reshaped(std::move(shape)), {a}, "reshape", [](Node& self) {
    if (self.input_needs_grad(0)) self.input_grad(0).flat() += self.grad.flat();
  });
  if (records_second_order(r))
    r.node()->graph_backward = [](const std::vector<Var>& in, const Var&, const Var& g) {
      return std::vector<Var>{reshape(g, in[0].shape())};
    };
  return r;
}

Var transpose(const Var& a, int axis0, int axis1) {
  int a0 = normalize_axis(axis0, a.dim(), "transpose", a.shape());
  int a1 = normalize_axis(axis1, a.dim(), "transpose", a.shape());
  if (a0 == a1) return reshape(a, a.shape());  // nothing to swap: a copy
  if (a0 > a1) std::swap(a0, a1);
  Shape out_shape = a.shape();
  std::swap(out_shape[static_cast<size_t>(a0)], out_shape[static_cast<size_t>(a1)]);
  Tensor out = Tensor::uninitialized(out_shape);
  swap_axes(swap_geometry(a.shape(), a0, a1), a.value().data(), out.data(), false);
  Var r = make_result(std::move(out), {a}, "transpose", [a0, a1](Node& self) {
    if (!self.input_needs_grad(0)) return;
    // The gradient swaps back: the same two axes of the output's shape.
    swap_axes(swap_geometry(self.value.shape(), a0, a1), self.grad.data(), self.input_grad(0).data(), true);
  });
  if (records_second_order(r))
    r.node()->graph_backward = [a0, a1](const std::vector<Var>&, const Var&, const Var& g) {
      return std::vector<Var>{transpose(g, a0, a1)};
    };
  return r;
}

std::vector<Var> split(const Var& a, int axis, const std::vector<int64_t>& sizes) {
  const int ax = normalize_axis(axis, a.dim(), "split", a.shape());
  const int64_t n = a.shape()[static_cast<size_t>(ax)];
  int64_t total = 0;
  bool negative = false;
  std::string listed;
  for (int64_t s : sizes) {
    listed += (listed.empty() ? "" : ", ") + std::to_string(s);
    negative = negative || s < 0;
    total += s;
  }
  if (negative || total != n)
    throw ValueError("split: sizes [" + listed + "] must be non-negative and sum to " + std::to_string(n) +
                     ", the size of axis " + std::to_string(axis) + " of " + a.value().shape_str());
  int64_t outer, inner;
  around_axis(a.shape(), ax, outer, inner);
  std::vector<Var> parts;
  parts.reserve(sizes.size());
  int64_t offset = 0;  // first index along the axis of the current piece
  for (int64_t s : sizes) {
    Shape shape = a.shape();
    shape[static_cast<size_t>(ax)] = s;
    Tensor piece = Tensor::uninitialized(shape);  // written in full below
    // Row o of the (outer, n·inner) view holds the piece's s·inner values at offset·inner.
    piece.matrix(outer, s * inner) = a.value().matrix(outer, n * inner).middleCols(offset * inner, s * inner);
    parts.push_back(make_result(std::move(piece), {a}, "split", [outer, n, inner, s, offset](Node& self) {
      if (!self.input_needs_grad(0)) return;
      self.input_grad(0).matrix(outer, n * inner).middleCols(offset * inner, s * inner) +=
          self.grad.matrix(outer, s * inner);
    }));
    if (records_second_order(parts.back()))
      parts.back().node()->graph_backward = [ax, n, s, offset](const std::vector<Var>& in, const Var&, const Var& g) {
        // g in place, zeros around it along the axis.
        Shape before = in[0].shape(), after = in[0].shape();
        before[static_cast<size_t>(ax)] = offset;
        after[static_cast<size_t>(ax)] = n - offset - s;
        return std::vector<Var>{concat({Var(Tensor(before)), g, Var(Tensor(after))}, ax)};
      };
    offset += s;
  }
  return parts;
}

Var concat(const std::vector<Var>& parts, int axis) {
  if (parts.empty()) throw ValueError("concat: no tensors to concatenate");
  const Shape& first = parts[0].shape();
  const int ax = normalize_axis(axis, static_cast<int>(first.size()), "concat", first);
  Shape out_shape = first;
  out_shape[static_cast<size_t>(ax)] = 0;
  std::vector<int64_t> widths;  // each part's size along the axis
  for (const Var& p : parts) {
    Shape expect = first;
    expect[static_cast<size_t>(ax)] = p.dim() == static_cast<int>(first.size()) ? p.shape()[static_cast<size_t>(ax)] : -1;
    if (p.shape() != expect)
      throw ShapeError("concat along axis " + std::to_string(axis) + ": shapes " + shape_str(first) + " and " +
                       p.value().shape_str() + " differ outside that axis");
    widths.push_back(p.shape()[static_cast<size_t>(ax)]);
    out_shape[static_cast<size_t>(ax)] += widths.back();
  }
  int64_t outer, inner;
  around_axis(out_shape, ax, outer, inner);
  const int64_t n = out_shape[static_cast<size_t>(ax)];
  Tensor out = Tensor::uninitialized(out_shape);
  int64_t offset = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    out.matrix(outer, n * inner).middleCols(offset * inner, widths[k] * inner) =
        parts[k].value().matrix(outer, widths[k] * inner);
    offset += widths[k];
  }
  Var r = make_result(std::move(out), parts, "concat", [widths, outer, inner, n](Node& self) {
    int64_t offset = 0;
    for (size_t k = 0; k < widths.size(); ++k) {
      if (self.input_needs_grad(k))
        self.input_grad(k).matrix(outer, widths[k] * inner) +=
            self.grad.matrix(outer, n * inner).middleCols(offset * inner, widths[k] * inner);
      offset += widths[k];
    }
  }, ValueReads::none());
  if (records_second_order(r))
    r.node()->graph_backward = [widths, ax](const std::vector<Var>&, const Var&, const Var& g) {
      return split(g, ax, widths);
    };
  return r;
}

}  // namespace attnlab
