// Matrix products (plain, batched, shared weight) and the fused linear map,
// all through the one product interface of framework/ops/gemm.h.
#include "framework/ops/matmul.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "framework/ops/broadcast.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "framework/ops/shape.h"
#include "framework/ops/gemm.h"

#if defined(__AVX512F__) && !defined(ATTNLAB_DOUBLE)
#include <immintrin.h>
#define ATTNLAB_AVX512_MASKS  // the ReLU masks of linear_relu under bf16
#endif

namespace attnlab {
namespace {

// A stored (rows, cols) row-major matrix starting at element `offset` of t.
GemmOperand operand(const Tensor& t, int64_t rows, int64_t cols, bool trans = false, int64_t offset = 0) {
  return {t.data() + offset, rows, cols, cols, trans};
}
GemmOutput output(Tensor& t, int64_t rows, int64_t cols) { return {t.data(), rows, cols, cols}; }

std::string matmul_operands(const Shape& a, bool ta, const Shape& b, bool tb) {
  return shape_str(a) + (ta ? "^T" : "") + " x " + shape_str(b) + (tb ? "^T" : "");
}

// The geometry of one matmul call, shared by forward and backward.
struct MatmulPlan {
  int64_t m, k, n;      // op(a) is (m, k), op(b) is (k, n)
  int64_t ar, ac, br, bc;  // stored matrix sizes of a and b
  int64_t batches;      // output batch count
  bool a_shared, b_shared;  // a 2-d operand reused by every batch of the other
  int64_t sa() const { return a_shared ? 0 : ar * ac; }  // batch strides
  int64_t sb() const { return b_shared ? 0 : br * bc; }
  int64_t so() const { return m * n; }
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

// out (=|+=) op(a) op(b) over the plan's batches (stride 0: shared). Two cases
// stack the batches into one product instead of B:
//   a 2-d b and an upright a: a's batches are one (B·m, k) matrix, out (B·m, n);
//   one out for all batches (a weight gradient) from a transposed a and an
//   upright b: their batches stack along k, (m, B·k)·(B·k, n).
void matmul_batches(Tensor& out, int64_t out_rows, int64_t out_cols, int64_t so, const GemmOperand& a, int64_t sa,
                    const GemmOperand& b, int64_t sb, int64_t batches, bool accumulate) {
  GemmOperand stacked_a = a, stacked_b = b;
  if (sb == 0 && so != 0 && !a.trans && sa == a.rows * a.cols) {
    stacked_a.rows *= batches;
    gemm({out.data(), out_rows * batches, out_cols, out_cols}, stacked_a, b, 1, accumulate);
    return;
  }
  if (so == 0 && a.trans && !b.trans && sa == a.rows * a.cols && sb == b.rows * b.cols) {
    stacked_a.rows *= batches;
    stacked_b.rows *= batches;
    gemm({out.data(), out_rows, out_cols, out_cols}, stacked_a, stacked_b, 1, accumulate);
    return;
  }
  gemm_batched(batches, {out.data(), out_rows, out_cols, out_cols}, so, a, sa, b, sb, 1, accumulate);
}

// With C = op(A) op(B) and G = dL/dC:
//   dA = G op(B)ᵀ          (or, stored transposed, op(B) Gᵀ)
//   dB = op(A)ᵀ G          (or, stored transposed, Gᵀ op(A))
// A 2-d operand shared by every batch sums its batches' contributions in batch order.
void matmul_backward(Node& self, const MatmulPlan& p, bool ta, bool tb) {
  const Tensor& g = self.grad;
  const Tensor& av = self.input_value(0);
  const Tensor& bv = self.input_value(1);
  const GemmOperand G = operand(g, p.m, p.n), Gt = operand(g, p.m, p.n, true);
  if (self.input_needs_grad(0)) {
    const GradTarget da = self.input_grad_target(0);
    const int64_t so = p.a_shared ? 0 : p.ar * p.ac;
    if (!ta)
      matmul_batches(*da.grad, p.ar, p.ac, so, G, p.so(), operand(bv, p.br, p.bc, !tb), p.sb(), p.batches, !da.fresh);
    else
      matmul_batches(*da.grad, p.ar, p.ac, so, operand(bv, p.br, p.bc, tb), p.sb(), Gt, p.so(), p.batches, !da.fresh);
  }
  if (self.input_needs_grad(1)) {
    const GradTarget db = self.input_grad_target(1);
    const int64_t so = p.b_shared ? 0 : p.br * p.bc;
    if (!tb)
      matmul_batches(*db.grad, p.br, p.bc, so, operand(av, p.ar, p.ac, !ta), p.sa(), G, p.so(), p.batches, !db.fresh);
    else
      matmul_batches(*db.grad, p.br, p.bc, so, Gt, p.so(), operand(av, p.ar, p.ac, ta), p.sa(), p.batches, !db.fresh);
  }
}

// matmul_backward's formulas in differentiable ops (second order); a shared
// 2-d operand sums the batches' parts (sum_to).
std::vector<Var> matmul_graph_grads(const Var& a, const Var& b, bool ta, bool tb, const Var& g) {
  std::vector<Var> grads(2);
  if (a.requires_grad())
    grads[0] = sum_to(ta ? matmul(b, g, tb, true) : matmul(g, b, false, !tb), a.shape());
  if (b.requires_grad())
    grads[1] = sum_to(tb ? matmul(g, a, true, ta) : matmul(a, g, !ta, false), b.shape());
  return grads;
}

}  // namespace

Var matmul(const Var& a, const Var& b, bool trans_a, bool trans_b) {
  const MatmulPlan p = plan_matmul(a.shape(), b.shape(), trans_a, trans_b);
  const Shape& batched = a.dim() >= b.dim() ? a.shape() : b.shape();
  Shape out_shape(batched.begin(), batched.end() - 2);
  out_shape.push_back(p.m);
  out_shape.push_back(p.n);
  Tensor out = Tensor::uninitialized(out_shape);
  matmul_batches(out, p.m, p.n, p.so(), operand(a.value(), p.ar, p.ac, trans_a), p.sa(),
                 operand(b.value(), p.br, p.bc, trans_b), p.sb(), p.batches, false);
  Var r = make_result(std::move(out), {a, b}, "matmul",
                      [p, trans_a, trans_b](Node& self) { matmul_backward(self, p, trans_a, trans_b); });
  if (records_second_order(r))
    r.node()->graph_backward = [trans_a, trans_b](const std::vector<Var>& in, const Var&, const Var& g) {
      return matmul_graph_grads(in[0], in[1], trans_a, trans_b, g);
    };
  return r;
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

// Precision bf16: x and W rounded once, for the forward product and for the
// backward's (x for dW = gᵀ x, W for dx = g W), and with a ReLU the bits
// y > 0 (the backward's mask): backward reads these, not the fp32 x, W and y,
// which are freed when the forward is done with them (ValueReads). Released
// when backward has used them. Absent under fp32.
struct LinearBf16 {
  Bf16Copy x, w;
  // relu only: bit k % 8 of byte r * mask_row_bytes(out) + k / 8 says y[r][k] > 0
  std::vector<uint8_t, TensorAllocator<uint8_t>> positive;
};

int64_t mask_row_bytes(int64_t cols) { return (cols + 7) / 8; }

// bits[k / 8] bit k % 8 = y[k] > 0, for k < n. Sixteen at a time with AVX-512
// (one compare gives the sixteen bits), then one at a time.
void pack_positive(const Real* y, int64_t n, uint8_t* bits) {
  int64_t k = 0;
#ifdef ATTNLAB_AVX512_MASKS
  for (; k + 16 <= n; k += 16) {
    const __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(y + k), _mm512_setzero_ps(), _CMP_GT_OQ);
    std::memcpy(bits + k / 8, &m, sizeof m);
  }
#endif
  for (; k < n; ++k) {
    if (k % 8 == 0) bits[k / 8] = 0;
    bits[k / 8] |= static_cast<uint8_t>((y[k] > Real(0)) << (k % 8));
  }
}

// out[i] = g[i] where bit k0 + i of bits is set, else 0, for i < n.
void select_positive(const uint8_t* bits, const Real* g, int64_t k0, int64_t n, Real* out) {
  const auto one = [&](int64_t i) { out[i] = (bits[(k0 + i) / 8] >> ((k0 + i) % 8)) & 1 ? g[i] : Real(0); };
  int64_t i = 0;
#ifdef ATTNLAB_AVX512_MASKS
  for (; i < n && (k0 + i) % 8; ++i) one(i);
  for (; i + 16 <= n; i += 16) {
    __mmask16 m;
    std::memcpy(&m, bits + (k0 + i) / 8, sizeof m);
    _mm512_storeu_ps(out + i, _mm512_maskz_mov_ps(m, _mm512_loadu_ps(g + i)));
  }
#endif
  for (; i < n; ++i) one(i);
}

// y = x Wᵀ + b, then max(y, 0) when relu is set, in the same pass over y.
Tensor linear_forward(const Var& x, const Var& weight, const Var& bias, int64_t rows, bool relu,
                      LinearBf16* copies) {
  const int64_t out_features = weight.size(0), in_features = weight.size(1);
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = Tensor::uninitialized(out_shape);
  GemmOperand xs = operand(x.value(), rows, in_features), wt = operand(weight.value(), out_features, in_features, true);
  if (copies) xs.bf16 = copies->x.data(), wt.bf16 = copies->w.data();
  gemm(output(out, rows, out_features), xs, wt, 1, false);
  if (!bias.defined() && !relu) return out;
  const Real* b = bias.defined() ? bias.value().data() : nullptr;
  Real* yp = out.data();
  uint8_t* positive = nullptr;
  const int64_t row_bytes = mask_row_bytes(out_features);
  if (relu && copies) {
    copies->positive.resize(static_cast<size_t>(rows * row_bytes));
    positive = copies->positive.data();
  }
  const bool parallel = rows > 1 && rows * out_features >= 2 * detail::kParallelGrain && omp_get_max_threads() > 1 &&
                        !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {  // whole rows: no two threads write one byte of the mask
    Real* yr = yp + r * out_features;
    if (b) {
      for (int64_t k = 0; k < out_features; ++k) yr[k] += b[k];
    }
    if (relu) {  // std::max(v, 0) keeps a NaN, as torch.relu does
      for (int64_t k = 0; k < out_features; ++k) yr[k] = std::max(yr[k], Real(0));
    }
    if (positive) pack_positive(yr, out_features, positive + r * row_bytes);
  }
  return out;
}

// The backward of linear for an upstream gradient g (N, out): dx += g W,
// dW += gᵀ x, db += column sums of g (row after row: a fixed order). Under
// bf16, g is rounded once for both products, x and W come from the forward's
// copies (a backward run again through the same graph rounds them again).
void linear_backward(Node& self, const Real* g_data, int64_t rows, int64_t in_features, int64_t out_features,
                     LinearBf16* copies) {
  GemmOperand g{g_data, rows, out_features, out_features};
  GemmOperand x = operand(self.input_value(0), rows, in_features);
  GemmOperand w = operand(self.input_value(1), out_features, in_features);
  const bool need_dx = self.input_needs_grad(0), need_dw = self.input_needs_grad(1);
  Bf16Copy g_bf16;
  if ((need_dx && gemm_in_bf16(rows, in_features, out_features)) ||
      (need_dw && gemm_in_bf16(out_features, in_features, rows))) {
    g_bf16 = Bf16Copy(g);
    g.bf16 = g_bf16.data();
  }
  if (copies) x.bf16 = copies->x.data(), w.bf16 = copies->w.data();
  if (need_dx) {  // dx (N, in) = g W
    const GradTarget dx = self.input_grad_target(0);
    gemm(output(*dx.grad, rows, in_features), g, w, 1, !dx.fresh);
  }
  if (need_dw) {  // dW (out, in) = gᵀ x
    const GradTarget dw = self.input_grad_target(1);
    GemmOperand gt = g;
    gt.trans = true;
    gemm(output(*dw.grad, out_features, in_features), gt, x, 1, !dw.fresh);
  }
  if (copies) *copies = LinearBf16{};
  if (self.inputs.size() > 2 && self.input_needs_grad(2)) {
    // Column sums, each column summed row after row: each thread takes one
    // contiguous range of columns (edges on multiples of 16) and reads its part
    // of every row, so every thread count gives the same bits.
    Real* db = self.input_grad(2).data();
    const int64_t blocks = (out_features + 15) / 16;
    const bool parallel = blocks > 1 && rows * out_features >= 2 * detail::kParallelGrain &&
                          omp_get_max_threads() > 1 && !omp_in_parallel();
    const int64_t threads = parallel ? std::min<int64_t>(omp_get_max_threads(), blocks) : 1;
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(threads)) if (parallel)
    for (int64_t t = 0; t < threads; ++t) {
      const int64_t j0 = blocks * t / threads * 16, j1 = std::min(out_features, blocks * (t + 1) / threads * 16);
      for (int64_t r = 0; r < rows; ++r) {
        const Real* gr = g_data + r * out_features;
        for (int64_t j = j0; j < j1; ++j) db[j] += gr[j];
      }
    }
  }
}

// linear, or linear_relu when relu is set: one op either way.
Var linear_op(const char* op, const Var& x, const Var& weight, const Var& bias, bool relu) {
  const int64_t rows = check_linear(op, x, weight, bias);
  const int64_t out_features = weight.size(0), in_features = weight.size(1);
  std::shared_ptr<LinearBf16> copies;
  if (gemm_in_bf16(rows, out_features, in_features))
    copies = std::make_shared<LinearBf16>(LinearBf16{Bf16Copy(operand(x.value(), rows, in_features)),
                                                     Bf16Copy(operand(weight.value(), out_features, in_features)),
                                                     {}});
  Tensor out = linear_forward(x, weight, bias, rows, relu, copies.get());
  // Where nothing records a backward, make_result drops it, and the copies with it.
  std::vector<Var> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  // fp32 reads x and W, and with a ReLU its own output; bf16 reads its copies.
  const ValueReads reads{relu && !copies, copies ? 0u : 3u};
  return make_result(std::move(out), std::move(inputs), op, [rows, in_features, out_features, relu, copies](Node& self) {
    if (!relu) {
      linear_backward(self, self.grad.data(), rows, in_features, out_features, copies.get());
      return;
    }
    // Through the ReLU: g where the output is positive (the pre-activation was
    // > 0; the derivative at 0 is 0, as torch takes it).
    // In place over g unless the gradient is kept (retain_grad): backward frees it after this.
    Tensor masked = self.retain_grad ? Tensor::uninitialized({rows, out_features}) : Tensor();
    const Real* g = self.grad.data();
    const Real* y = self.value.data();
    const uint8_t* positive = copies ? copies->positive.data() : nullptr;
    const int64_t row_bytes = mask_row_bytes(out_features);
    Real* m = self.retain_grad ? masked.data() : self.grad.data();
    detail::parallel_chunks(rows * out_features, [&](int64_t lo, int64_t hi) {
      if (positive) {
        for (int64_t i = lo; i < hi;) {  // one row (or the part of it in this chunk) per pass
          const int64_t k0 = i % out_features, n = std::min(out_features - k0, hi - i);
          select_positive(positive + i / out_features * row_bytes, g + i, k0, n, m + i);
          i += n;
        }
        return;
      }
      // A select, not a branch: the signs are random, a branch mispredicts.
      const int64_t n = hi - lo;
      VecMap(m + lo, n).array() =
          (ConstVecMap(y + lo, n).array() > Real(0)).select(ConstVecMap(g + lo, n).array(), Real(0));
    });
    linear_backward(self, m, rows, in_features, out_features, copies.get());
  }, reads);
}

}  // namespace

namespace {

// linear's backward in differentiable ops (second order), g the gradient
// after the ReLU's mask: dx = g W, dW = gᵀ x over all rows, db = g's column sums.
// matmul stacks the rows of a g of 2 or more dims against the 2-d W in one
// product: dx needs no reshapes then (a 1-d x is one row).
std::vector<Var> linear_graph_grads(const std::vector<Var>& in, const Var& g) {
  const Var &x = in[0], &w = in[1];
  std::vector<Var> grads(in.size());
  if (x.requires_grad())
    grads[0] = x.dim() >= 2 ? matmul(g, w) : reshape(matmul(reshape(g, {1, w.size(0)}), w), x.shape());
  if (w.requires_grad())
    grads[1] = matmul(reshape(g, {-1, w.size(0)}), reshape(x, {-1, w.size(1)}), /*trans_a=*/true, false);
  if (in.size() > 2 && in[2].requires_grad()) grads[2] = sum_to(g, in[2].shape());
  return grads;
}

Var with_second_order(Var r, bool relu) {
  if (records_second_order(r))
    r.node()->graph_backward = [relu](const std::vector<Var>& in, const Var& y, const Var& g) {
      if (!relu) return linear_graph_grads(in, g);
      Tensor positive = Tensor::uninitialized(y.shape());  // the ReLU's slope, a constant
      positive.flat().array() = (y.value().flat().array() > Real(0)).template cast<Real>();
      return linear_graph_grads(in, mul(g, Var(std::move(positive))));
    };
  return r;
}

}  // namespace

Var linear(const Var& x, const Var& weight, const Var& bias) {
  return with_second_order(linear_op("linear", x, weight, bias, /*relu=*/false), false);
}

Var linear_relu(const Var& x, const Var& weight, const Var& bias) {
  return with_second_order(linear_op("linear_relu", x, weight, bias, /*relu=*/true), true);
}

}  // namespace attnlab
