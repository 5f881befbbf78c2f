#include "framework/ops/rotary.h"

#include <cmath>
#include <string>

namespace attnlab {

namespace {

// cos θ and sin θ for every (t, i): (T, d_k / 2) each. Angles are computed in
// double so float32 keeps full precision at large positions.
struct RotaryTable {
  Tensor cos, sin;
};

RotaryTable make_table(int64_t t_len, int64_t d_k, int64_t offset, double base) {
  const int64_t half = d_k / 2;
  RotaryTable table{Tensor({t_len, half}), Tensor({t_len, half})};
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d_k));
    for (int64_t t = 0; t < t_len; ++t) {
      const double angle = static_cast<double>(offset + t) * inv_freq;
      table.cos[t * half + i] = static_cast<Real>(std::cos(angle));
      table.sin[t * half + i] = static_cast<Real>(std::sin(angle));
    }
  }
  return table;
}

// Where the rows of d_k channels lie: rows = numel / d_k, row r at time
// (r / per_step) % T: per_step = 1 for (..., T, d_k), h for (B, T, h·d_k).
struct RowGeometry {
  int64_t rows, t_len, d_k, per_step;
};

// Rotates every row of src by +θ (sign = 1) or −θ (sign = −1), writing into
// dst or accumulating into it. Each row is written by one thread only, so
// results do not depend on scheduling.
template <bool Accumulate>
void rotate_rows(const Real* src, Real* dst, const RowGeometry& g, const RotaryTable& table, Real sign) {
  const int64_t rows = g.rows, t_len = g.t_len, d_k = g.d_k, per_step = g.per_step;
  const int64_t half = d_k / 2;
  const Real* cos_t = table.cos.data();
  const Real* sin_t = table.sin.data();
#pragma omp parallel for schedule(static) if (rows * d_k >= (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = (r / per_step) % t_len;
    const Real* x = src + r * d_k;
    Real* y = dst + r * d_k;
    const Real* c = cos_t + t * half;
    const Real* s = sin_t + t * half;
    for (int64_t i = 0; i < half; ++i) {
      const Real x0 = x[2 * i], x1 = x[2 * i + 1];
      const Real sn = sign * s[i];
      const Real y0 = x0 * c[i] - x1 * sn;
      const Real y1 = x0 * sn + x1 * c[i];
      if (Accumulate) {
        y[2 * i] += y0;
        y[2 * i + 1] += y1;
      } else {
        y[2 * i] = y0;
        y[2 * i + 1] = y1;
      }
    }
  }
}

void check_rotary(int64_t d_k, Real base) {
  check_rotary_width(d_k);
  if (!(base > 0) || !std::isfinite(static_cast<double>(base)))
    throw ValueError("rotary: base must be a positive finite number, got " + std::to_string(base));
}

// Rotates by direction·θ (direction 1: the op; -1: its backward, as an op for
// second order).
Var rotate(const Var& x, const RowGeometry& g, int64_t offset, Real base, Real direction = 1) {
  check_rotary(g.d_k, base);
  Tensor out = Tensor::uninitialized(x.shape());
  if (out.numel() == 0) return make_result(std::move(out), {x}, "rotary", [](Node&) {});
  RotaryTable table = make_table(g.t_len, g.d_k, offset, static_cast<double>(base));
  rotate_rows<false>(x.value().data(), out.data(), g, table, direction);

  Var r = make_result(std::move(out), {x}, "rotary", [table = std::move(table), g, direction](Node& self) {
    if (!self.input_needs_grad(0)) return;
    // dL/dx = Rᵀ dL/dy = R(−θ) dL/dy.
    rotate_rows<true>(self.grad.data(), self.input_grad(0).data(), g, table, -direction);
  });
  if (records_second_order(r))
    r.node()->graph_backward = [g, offset, base, direction](const std::vector<Var>&, const Var&, const Var& grad) {
      return std::vector<Var>{rotate(grad, g, offset, base, -direction)};
    };
  return r;
}

}  // namespace

void check_rotary_width(int64_t d_k) {
  if (d_k % 2 != 0) throw ValueError("rotary: d_k must be even to rotate pairs, got d_k = " + std::to_string(d_k));
}

Var rotary(const Var& x, int64_t offset, Real base) {
  if (x.dim() < 2)
    throw ShapeError("rotary: expected x of shape (..., T, d_k), got " + x.value().shape_str());
  const int64_t d_k = x.size(-1);
  return rotate(x, {d_k > 0 ? x.numel() / d_k : 0, x.size(-2), d_k, 1}, offset, base);
}

Var rotary_heads(const Var& x, int64_t n_heads, int64_t offset, Real base) {
  if (x.dim() != 3 || n_heads <= 0 || x.size(2) % n_heads != 0)
    throw ShapeError("rotary_heads: expected x of shape (B, T, h·d_k) with h = " + std::to_string(n_heads) +
                     " heads, got " + x.value().shape_str());
  const int64_t d_k = x.size(2) / n_heads;
  return rotate(x, {x.size(0) * x.size(1) * n_heads, x.size(1), d_k, n_heads}, offset, base);
}

}  // namespace attnlab
