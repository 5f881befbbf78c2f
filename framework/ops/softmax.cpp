// Fused softmax and log-softmax along the last axis: forward and backward.
#include "framework/ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"

namespace attnlab {
namespace {

using ArrayMap = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;
using ConstArrayMap = Eigen::Map<const Eigen::Array<Real, Eigen::Dynamic, 1>>;

// Alignment independence. Eigen evaluates the first few elements of an
// unaligned destination (or of a reduction straight over an unaligned map)
// with scalar code until it reaches an aligned address: std::exp instead of
// its packet exp, and another summation order. Results would then depend on
// where a row happens to sit in memory, and a resumed run or a sliced tensor
// would not reproduce bitwise. So exps are written to an aligned stack buffer
// and reductions run over expressions (which Eigen never peels): every result
// depends on the values and on n only.
constexpr int64_t kChunk = 256;
using AlignedChunk = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>, Eigen::Aligned64>;

// A sum whose order depends on n only: `a + 0` is an expression.
Real unpeeled_sum(const ConstArrayMap& a) { return (a + Real(0)).sum(); }

// Runs body(r) for every row r, over threads when the rows are worth it.
// Each row is written by one thread only, so results do not depend on the team.
template <class RowFn>
void for_each_row(int64_t rows, int64_t n, const RowFn& body) {
#pragma omp parallel for schedule(static) if (softmax_rows_worth_parallel(rows, n))
  for (int64_t r = 0; r < rows; ++r) body(r);
}

// The scaffolding softmax and log_softmax share: a row kernel maps each row
// (n values along the last axis) of x to y, and `backward_row(y, dy, dx, n)`
// accumulates one row's input gradient from the cached output. Both are
// inlined into the loops (templates), so this costs no call or pass per row.
// `graph` is the backward in differentiable ops (second order).
template <class ForwardRow, class BackwardRow>
Var rowwise_op(const Var& a, const char* name, ForwardRow forward_row, BackwardRow backward_row,
               Var (*graph)(const Var& x, const Var& y, const Var& g)) {
  Tensor out = Tensor::uninitialized(a.shape());
  const int64_t n = a.dim() ? a.size(-1) : 1;
  const int64_t rows = n ? a.numel() / n : 0;
  const Real* x = a.value().data();
  Real* y = out.data();
  for_each_row(rows, n, [&](int64_t r) { forward_row(x + r * n, y + r * n, n); });

  Var r = make_result(std::move(out), {a}, name, [n, rows, backward_row](Node& self) {
    if (!self.input_needs_grad(0)) return;
    const Real* y = self.value.data();
    const Real* dy = self.grad.data();
    Real* dx = self.input_grad(0).data();
    for_each_row(rows, n, [&](int64_t r) { backward_row(y + r * n, dy + r * n, dx + r * n, n); });
  });
  if (records_second_order(r))
    r.node()->graph_backward = [graph](const std::vector<Var>& in, const Var& y, const Var& g) {
      return std::vector<Var>{graph(in[0], y, g)};
    };
  return r;
}

// softmax_row for a row of exactly N values (the attention rows of S, M and L:
// 16, 32 and 64 keys), held in fixed-size aligned locals: the steps of
// detail::softmax_row_chunked, and its bits, without its per-row setup (the
// loops' bounds, peeling and chunking), which costs more than the arithmetic
// on a row this short.
template <int N>
void softmax_fixed_row(const Real* x, Real* y) {
  using Row = Eigen::Array<Real, N, 1>;
  const Row v = Eigen::Map<const Row>(x);
  const Real m = v.maxCoeff();
  Eigen::Map<Row> out(y);
  if (m == kNegInf) {
    out.setZero();
    return;
  }
  alignas(64) Real buf[N];
  Eigen::Map<Row, Eigen::Aligned64> e(buf);
  e = (v - m).exp();
  // See softmax_row_chunked; a plain loop, which the compiler vectorises
  // (Eigen's select goes element by element, and its scalar stores stall the
  // vector reads after them).
  const Real tiny = std::numeric_limits<Real>::min();
  for (int i = 0; i < N; ++i) buf[i] = buf[i] < tiny ? Real(0) : buf[i];
  const Real total = AlignedChunk(buf, N).sum();  // the chunked kernel's order of the sum
  out = e * (Real(1) / total);
}

}  // namespace

void softmax_row(const Real* x, Real* y, int64_t n) {
  switch (n) {
    case 16: return softmax_fixed_row<16>(x, y);
    case 32: return softmax_fixed_row<32>(x, y);
    case 64: return softmax_fixed_row<64>(x, y);
    default: return detail::softmax_row_chunked(x, y, n);
  }
}

void detail::softmax_row_chunked(const Real* x, Real* y, int64_t n) {
  if (n <= 0) return;
  const Real m = ConstArrayMap(x, n).maxCoeff();  // exact in any order
  if (m == kNegInf) {  // fully masked: attends to nothing (see softmax.h)
    ArrayMap(y, n).setZero();
    return;
  }
  // Eigen's vectorised exp clamps its argument near the underflow limit, so
  // exp(-inf) comes out as a tiny denormal instead of 0. Masked entries must be
  // exactly 0, and anything below the smallest normal number is 0 for our
  // purposes (the max entry contributes 1 to the sum).
  const Real tiny = std::numeric_limits<Real>::min();
  alignas(64) Real buf[kChunk];
  Real total = 0;
  // Chunk by chunk: y may alias x, and chunk c of x is read before it is overwritten.
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t len = std::min(kChunk, n - start);
    AlignedChunk e(buf, len);
    e = (ConstArrayMap(x + start, len) - m).exp();
    for (int64_t i = 0; i < len; ++i) buf[i] = buf[i] < tiny ? Real(0) : buf[i];
    total += e.sum();
    ArrayMap(y + start, len) = e;
  }
  ArrayMap(y, n) *= Real(1) / total;
}

void log_softmax_row(const Real* x, Real* y, int64_t n) {
  if (n <= 0) return;
  ConstArrayMap xa(x, n);
  const Real m = xa.maxCoeff();
  if (m == kNegInf) {  // fully masked: log of an all-zero row
    ArrayMap(y, n).setConstant(kNegInf);
    return;
  }
  // The max entry contributes exp(0) = 1, so the sum is >= 1 and its log is
  // finite. Subtracting m and log(sum) separately (not m + log(sum) at once)
  // keeps the small log term exact when |m| is large.
  const Real log_sum = std::log((xa - m).exp().sum());
  ArrayMap(y, n) = (xa - m) - log_sum;
}

Var softmax(const Var& a) {
  return rowwise_op(
      a, "softmax", [](const Real* x, Real* y, int64_t n) { softmax_row(x, y, n); },
      [](const Real* y, const Real* dy, Real* dx, int64_t n) {
        // dx = y * (dy - sum(dy * y)); a fully masked row has y = 0, hence dx = 0.
        ConstArrayMap yr(y, n), dyr(dy, n);
        const Real dot = (yr * dyr).sum();
        ArrayMap(dx, n) += yr * (dyr - dot);
      },
      [](const Var&, const Var& y, const Var& g) { return mul(y, sub(g, sum(mul(g, y), -1, true))); });
}

Var log_softmax(const Var& a) {
  return rowwise_op(
      a, "log_softmax", [](const Real* x, Real* y, int64_t n) { log_softmax_row(x, y, n); },
      [](const Real* y, const Real* dy, Real* dx, int64_t n) {
        // dx = dy - softmax * sum(dy), with softmax = exp(y) recovered from the
        // cached output. A fully masked row (all -inf) passes no gradient.
        if (ConstArrayMap(y, n).maxCoeff() == kNegInf) return;
        const Real total = unpeeled_sum(ConstArrayMap(dy, n));
        alignas(64) Real buf[kChunk];
        for (int64_t start = 0; start < n; start += kChunk) {
          const int64_t len = std::min(kChunk, n - start);
          AlignedChunk p(buf, len);
          p = ConstArrayMap(y + start, len).exp();
          ArrayMap(dx + start, len) += ConstArrayMap(dy + start, len) - p * total;
        }
      },
      [](const Var& x, const Var&, const Var& g) { return sub(g, mul(softmax(x), sum(g, -1, true))); });
}

}  // namespace attnlab
