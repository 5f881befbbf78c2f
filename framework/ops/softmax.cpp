// Fused softmax and log-softmax along the last axis: forward and backward.
#include "framework/ops/softmax.h"

#include <cmath>
#include <limits>

namespace attnlab {
namespace {

using ArrayMap = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;
using ConstArrayMap = Eigen::Map<const Eigen::Array<Real, Eigen::Dynamic, 1>>;

constexpr Real kNegInf = -std::numeric_limits<Real>::infinity();

// Rows are worth spreading over threads only when there is enough work to pay
// for waking the team (~ tens of microseconds of exp()).
constexpr int64_t kParallelMinElements = 1 << 15;

bool worth_parallel(int64_t rows, int64_t n) { return rows > 1 && rows * n >= kParallelMinElements; }

}  // namespace

void softmax_row(const Real* x, Real* y, int64_t n) {
  if (n <= 0) return;
  ConstArrayMap xa(x, n);
  ArrayMap ya(y, n);
  const Real m = xa.maxCoeff();
  if (m == kNegInf) {  // fully masked: attends to nothing (see softmax.h)
    ya.setZero();
    return;
  }
  ya = (xa - m).exp();  // vectorised; y may alias x (coefficient-wise)
  // Eigen's vectorised exp clamps its argument near the underflow limit, so
  // exp(-inf) comes out as a tiny denormal instead of 0. Masked entries must be
  // exactly 0, and anything below the smallest normal number is 0 for our
  // purposes (the max entry contributes 1 to the sum).
  const Real tiny = std::numeric_limits<Real>::min();
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] < tiny ? Real(0) : y[i];
  ya *= Real(1) / ya.sum();
}

void log_softmax_row(const Real* x, Real* y, int64_t n) {
  if (n <= 0) return;
  ConstArrayMap xa(x, n);
  ArrayMap ya(y, n);
  const Real m = xa.maxCoeff();
  if (m == kNegInf) {  // fully masked: log of an all-zero row
    ya.setConstant(kNegInf);
    return;
  }
  // The max entry contributes exp(0) = 1, so the sum is >= 1 and its log is finite.
  const Real lse = m + std::log((xa - m).exp().sum());
  ya = xa - lse;
}

Var softmax(const Var& a) {
  Tensor out(a.shape());
  const int64_t n = a.dim() ? a.size(-1) : 1;
  const int64_t rows = n ? a.numel() / n : 0;
  const Real* x = a.value().data();
  Real* y = out.data();
#pragma omp parallel for schedule(static) if (worth_parallel(rows, n))
  for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * n, y + r * n, n);

  return make_result(std::move(out), {a}, "softmax", [n, rows](Node& self) {
    if (!self.input_needs_grad(0)) return;
    // dx = y * (dy - sum(dy * y)); a fully masked row has y = 0, hence dx = 0.
    const Real* y = self.value.data();
    const Real* dy = self.grad.data();
    Real* dx = self.input_grad(0).data();
#pragma omp parallel for schedule(static) if (worth_parallel(rows, n))
    for (int64_t r = 0; r < rows; ++r) {
      ConstArrayMap yr(y + r * n, n), dyr(dy + r * n, n);
      ArrayMap dxr(dx + r * n, n);
      const Real dot = (yr * dyr).sum();
      dxr += yr * (dyr - dot);
    }
  });
}

Var log_softmax(const Var& a) {
  Tensor out(a.shape());
  const int64_t n = a.dim() ? a.size(-1) : 1;
  const int64_t rows = n ? a.numel() / n : 0;
  const Real* x = a.value().data();
  Real* y = out.data();
#pragma omp parallel for schedule(static) if (worth_parallel(rows, n))
  for (int64_t r = 0; r < rows; ++r) log_softmax_row(x + r * n, y + r * n, n);

  return make_result(std::move(out), {a}, "log_softmax", [n, rows](Node& self) {
    if (!self.input_needs_grad(0)) return;
    // dx = dy - softmax * sum(dy), with softmax = exp(y) recovered from the
    // cached output. A fully masked row (all -inf) passes no gradient.
    const Real* y = self.value.data();
    const Real* dy = self.grad.data();
    Real* dx = self.input_grad(0).data();
#pragma omp parallel for schedule(static) if (worth_parallel(rows, n))
    for (int64_t r = 0; r < rows; ++r) {
      ConstArrayMap yr(y + r * n, n), dyr(dy + r * n, n);
      if (yr.maxCoeff() == kNegInf) continue;
      ArrayMap dxr(dx + r * n, n);
      const Real total = dyr.sum();
      dxr += dyr - yr.exp() * total;
    }
  });
}

}  // namespace attnlab
