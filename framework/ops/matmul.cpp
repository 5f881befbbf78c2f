// Matrix products (plain, batched, shared weight) and the fused linear map.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_pd, GCC bug 105593) when Eigen vectorises; silence it here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "framework/ops/matmul.h"

#include <omp.h>

#include <algorithm>

#include "framework/ops/broadcast.h"

namespace attnlab {
namespace {

// out (=|+=) op(x) op(y), op = transpose when the flag is set. Eigen's
// .transpose() on a map is a view, so no operand is ever copied.
void gemm(MatMap out, const ConstMatMap& x, bool tx, const ConstMatMap& y, bool ty, bool accumulate) {
  if (accumulate) {
    if (!tx && !ty) out.noalias() += x * y;
    else if (!tx) out.noalias() += x * y.transpose();
    else if (!ty) out.noalias() += x.transpose() * y;
    else out.noalias() += x.transpose() * y.transpose();
  } else {
    if (!tx && !ty) out.noalias() = x * y;
    else if (!tx) out.noalias() = x * y.transpose();
    else if (!ty) out.noalias() = x.transpose() * y;
    else out.noalias() = x.transpose() * y.transpose();
  }
}

ConstMatMap view(const Tensor& t, int64_t offset, int64_t rows, int64_t cols) {
  return ConstMatMap(t.data() + offset, rows, cols);
}
MatMap view(Tensor& t, int64_t offset, int64_t rows, int64_t cols) { return MatMap(t.data() + offset, rows, cols); }

// Batched loops run in parallel over the batch when there is enough work per
// call to pay for the threads; each iteration writes only its own batch.
bool parallel_batches(int64_t batches, int64_t flops_per_batch) {
  return batches > 1 && batches * flops_per_batch >= detail::kParallelGrain * 4 && omp_get_max_threads() > 1 &&
         !omp_in_parallel();
}

std::string matmul_operands(const Shape& a, bool ta, const Shape& b, bool tb) {
  return shape_str(a) + (ta ? "^T" : "") + " x " + shape_str(b) + (tb ? "^T" : "");
}

// The geometry of one matmul call, shared by forward and backward.
struct MatmulPlan {
  int64_t m, k, n;      // op(a) is (m, k), op(b) is (k, n)
  int64_t ar, ac, br, bc;  // stored matrix sizes of a and b
  int64_t batches;      // output batch count
  bool a_shared, b_shared;  // a 2-d operand reused by every batch of the other
};

MatmulPlan plan_matmul(const Shape& a, const Shape& b, bool ta, bool tb) {
  if (a.size() < 2 || b.size() < 2)
    throw ShapeError("matmul: " + matmul_operands(a, ta, b, tb) + ": both operands need at least 2 dims");
  MatmulPlan p;
  p.ar = a[a.size() - 2];
  p.ac = a.back();
  p.br = b[b.size() - 2];
  p.bc = b.back();
  p.m = ta ? p.ac : p.ar;
  p.k = ta ? p.ar : p.ac;
  const int64_t kb = tb ? p.bc : p.br;
  p.n = tb ? p.br : p.bc;
  if (p.k != kb)
    throw ShapeError("matmul: " + matmul_operands(a, ta, b, tb) + ": inner sizes " + std::to_string(p.k) + " and " +
                     std::to_string(kb) + " differ");
  p.a_shared = a.size() == 2 && b.size() > 2;
  p.b_shared = b.size() == 2 && a.size() > 2;
  if (a.size() > 2 && b.size() > 2 && !std::equal(a.begin(), a.end() - 2, b.begin(), b.end() - 2))
    throw ShapeError("matmul: " + matmul_operands(a, ta, b, tb) +
                     ": batch dims differ (they must be equal, or one operand must be 2-d)");
  const Shape& batched = a.size() >= b.size() ? a : b;
  p.batches = shape_numel(Shape(batched.begin(), batched.end() - 2));
  return p;
}

}  // namespace

Var matmul(const Var& a, const Var& b, bool trans_a, bool trans_b) {
  const MatmulPlan p = plan_matmul(a.shape(), b.shape(), trans_a, trans_b);
  const Shape& batched = a.dim() >= b.dim() ? a.shape() : b.shape();
  Shape out_shape(batched.begin(), batched.end() - 2);
  out_shape.push_back(p.m);
  out_shape.push_back(p.n);
  Tensor out = Tensor::uninitialized(out_shape);
  const Tensor& av = a.value();
  const Tensor& bv = b.value();
  const int64_t sa = p.a_shared ? 0 : p.ar * p.ac, sb = p.b_shared ? 0 : p.br * p.bc, so = p.m * p.n;

  if (p.b_shared && !trans_a) {
    // (B, m, k) · (k, n): a's batches stack into one (B·m, k) matrix, one gemm.
    gemm(view(out, 0, p.batches * p.m, p.n), view(av, 0, p.batches * p.m, p.k), false, bv.matrix(), trans_b, false);
  } else {
#pragma omp parallel for schedule(static) if (parallel_batches(p.batches, p.m * p.n * p.k))
    for (int64_t i = 0; i < p.batches; ++i)
      gemm(view(out, i * so, p.m, p.n), view(av, i * sa, p.ar, p.ac), trans_a, view(bv, i * sb, p.br, p.bc), trans_b,
           false);
  }

  return make_result(std::move(out), {a, b}, "matmul", [p, trans_a, trans_b, sa, sb, so](Node& self) {
    const Tensor& g = self.grad;
    const Tensor& av = self.input_value(0);
    const Tensor& bv = self.input_value(1);
    const bool par = parallel_batches(p.batches, p.m * p.n * p.k);
    // With C = op(A) op(B) and G = dL/dC:
    //   dA = G op(B)ᵀ          (or, stored transposed, op(B) Gᵀ)
    //   dB = op(A)ᵀ G          (or, stored transposed, Gᵀ op(A))
    auto grad_a = [&](MatMap da, const ConstMatMap& gi, const ConstMatMap& bi) {
      if (!trans_a) gemm(da, gi, false, bi, !trans_b, true);
      else gemm(da, bi, trans_b, gi, true, true);
    };
    auto grad_b = [&](MatMap db, const ConstMatMap& gi, const ConstMatMap& ai) {
      if (!trans_b) gemm(db, ai, !trans_a, gi, false, true);
      else gemm(db, gi, true, ai, trans_a, true);
    };
    if (self.input_needs_grad(0)) {
      Tensor& da = self.input_grad(0);
      if (p.b_shared && !trans_a) {
        grad_a(view(da, 0, p.batches * p.m, p.k), view(g, 0, p.batches * p.m, p.n), bv.matrix());
      } else if (p.a_shared) {
        // Every batch adds into the one shared matrix: summed in batch order.
        for (int64_t i = 0; i < p.batches; ++i)
          grad_a(view(da, 0, p.ar, p.ac), view(g, i * so, p.m, p.n), view(bv, i * sb, p.br, p.bc));
      } else {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < p.batches; ++i)
          grad_a(view(da, i * sa, p.ar, p.ac), view(g, i * so, p.m, p.n), view(bv, i * sb, p.br, p.bc));
      }
    }
    if (self.input_needs_grad(1)) {
      Tensor& db = self.input_grad(1);
      if (p.b_shared && !trans_a) {
        // One big gemm over the stacked (B·m, k) a and (B·m, n) gradient.
        grad_b(db.matrix(), view(g, 0, p.batches * p.m, p.n), view(av, 0, p.batches * p.m, p.k));
      } else if (p.b_shared) {
        for (int64_t i = 0; i < p.batches; ++i)
          grad_b(view(db, 0, p.br, p.bc), view(g, i * so, p.m, p.n), view(av, i * sa, p.ar, p.ac));
      } else {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < p.batches; ++i)
          grad_b(view(db, i * sb, p.br, p.bc), view(g, i * so, p.m, p.n), view(av, i * sa, p.ar, p.ac));
      }
    }
  });
}

namespace {

// Checks linear's operands; returns N, the rows of x viewed as (N, in).
int64_t check_linear(const char* op, const Var& x, const Var& weight, const Var& bias) {
  const std::string name(op);
  if (weight.dim() != 2)
    throw ShapeError(name + ": weight must be (out, in), got " + weight.value().shape_str());
  const int64_t out_features = weight.size(0), in_features = weight.size(1);
  if (x.dim() < 1 || x.size(-1) != in_features)
    throw ShapeError(name + ": input " + x.value().shape_str() + " and weight " + weight.value().shape_str() +
                     ": input features " + (x.dim() < 1 ? std::string("(none)") : std::to_string(x.size(-1))) +
                     " and " + std::to_string(in_features) + " differ");
  if (bias.defined() && bias.shape() != Shape{out_features})
    throw ShapeError(name + ": bias " + bias.value().shape_str() + " does not match weight " +
                     weight.value().shape_str() + ": expected (" + std::to_string(out_features) + ",)");
  return shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
}

// y = x Wᵀ + b, then max(y, 0) when relu is set, in the same pass over y.
Tensor linear_forward(const Var& x, const Var& weight, const Var& bias, int64_t rows, bool relu) {
  const int64_t out_features = weight.size(0), in_features = weight.size(1);
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = Tensor::uninitialized(out_shape);
  MatMap y = out.matrix(rows, out_features);
  y.noalias() = x.value().matrix(rows, in_features) * weight.value().matrix().transpose();
  if (!bias.defined() && !relu) return out;
  const Real* b = bias.defined() ? bias.value().data() : nullptr;
  Real* yp = out.data();
  detail::parallel_chunks(rows * out_features, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi;) {  // one row (or the part of it in this chunk) per pass
      const int64_t j0 = i % out_features, n = std::min(out_features - j0, hi - i);
      Real* yr = yp + i;
      if (b) {
        for (int64_t k = 0; k < n; ++k) yr[k] += b[j0 + k];
      }
      if (relu) {  // std::max(v, 0) keeps a NaN, as torch.relu does
        for (int64_t k = 0; k < n; ++k) yr[k] = std::max(yr[k], Real(0));
      }
      i += n;
    }
  });
  return out;
}

// The backward of linear for an upstream gradient g (N, out): dx += g W,
// dW += gᵀ x, db += column sums of g (row after row: a fixed order).
void linear_backward(Node& self, const Real* g_data, int64_t rows, int64_t in_features, int64_t out_features) {
  ConstMatMap g(g_data, rows, out_features);
  const Tensor& w = self.input_value(1);  // (out, in)
  if (self.input_needs_grad(0)) self.input_grad(0).matrix(rows, in_features).noalias() += g * w.matrix();
  if (self.input_needs_grad(1))
    self.input_grad(1).matrix().noalias() += g.transpose() * self.input_value(0).matrix(rows, in_features);
  if (self.inputs.size() > 2 && self.input_needs_grad(2)) {
    Real* db = self.input_grad(2).data();
    for (int64_t r = 0; r < rows; ++r) {
      const Real* gr = g_data + r * out_features;
      for (int64_t j = 0; j < out_features; ++j) db[j] += gr[j];
    }
  }
}

// linear, or linear_relu when relu is set: one op either way.
Var linear_op(const char* op, const Var& x, const Var& weight, const Var& bias, bool relu) {
  const int64_t rows = check_linear(op, x, weight, bias);
  const int64_t out_features = weight.size(0), in_features = weight.size(1);
  Tensor out = linear_forward(x, weight, bias, rows, relu);
  std::vector<Var> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return make_result(std::move(out), std::move(inputs), op, [rows, in_features, out_features, relu](Node& self) {
    if (!relu) {
      linear_backward(self, self.grad.data(), rows, in_features, out_features);
      return;
    }
    // Through the ReLU: g where the output is positive (the pre-activation was
    // > 0; the derivative at 0 is 0, as torch takes it).
    Tensor masked = Tensor::uninitialized({rows, out_features});
    const Real* g = self.grad.data();
    const Real* y = self.value.data();
    Real* m = masked.data();
    detail::parallel_chunks(rows * out_features, [&](int64_t lo, int64_t hi) {
      // A select, not a branch: the signs are random, a branch mispredicts.
      const int64_t n = hi - lo;
      VecMap(m + lo, n).array() =
          (ConstVecMap(y + lo, n).array() > Real(0)).select(ConstVecMap(g + lo, n).array(), Real(0));
    });
    linear_backward(self, m, rows, in_features, out_features);
  });
}

}  // namespace

Var linear(const Var& x, const Var& weight, const Var& bias) {
  return linear_op("linear", x, weight, bias, /*relu=*/false);
}

Var linear_relu(const Var& x, const Var& weight, const Var& bias) {
  return linear_op("linear_relu", x, weight, bias, /*relu=*/true);
}

}  // namespace attnlab
