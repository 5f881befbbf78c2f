// Inverted dropout with an explicit generator.
#include "framework/ops/dropout.h"

#include <cmath>

#include "framework/ops/broadcast.h"
#include "framework/ops/elementwise.h"

namespace attnlab {

Var dropout(const Var& a, Real p, Rng& rng, bool training) {
  if (!(p >= 0 && p < 1))  // also rejects NaN
    throw ValueError("dropout: p must be in [0, 1), got " + std::to_string(p));
  if (!training || p == 0) return a;

  // keep[i] = 1/(1-p) with probability 1-p, else 0. Drawn serially from rng,
  // one 64-bit draw per element turned into a uniform in [0, 1) with 53 bits,
  // so the mask depends only on the generator's state (not on the standard
  // library's distribution code or the thread count).
  const Tensor& x = a.value();
  const Real keep_scale = Real(1) / (Real(1) - p);
  const double threshold = static_cast<double>(p);
  Tensor keep(x.shape());
  for (int64_t i = 0; i < keep.numel(); ++i) {
    const double u = static_cast<double>(rng.next_u64() >> 11) * 0x1.0p-53;
    keep[i] = u >= threshold ? keep_scale : Real(0);
  }
  Tensor out = Tensor::uninitialized(x.shape());
  detail::parallel_chunks(x.numel(), [&](int64_t lo, int64_t hi) {
    out.flat().segment(lo, hi - lo) = x.flat().segment(lo, hi - lo).cwiseProduct(keep.flat().segment(lo, hi - lo));
  });
  // Second order: the backward g·keep, with keep a constant (copied only then).
  Tensor keep_for_graph = second_order_enabled() ? keep : Tensor();
  Var r = make_result(std::move(out), {a}, "dropout", [keep = std::move(keep)](Node& self) {
    if (!self.input_needs_grad(0)) return;
    Tensor& gx = self.input_grad(0);
    detail::parallel_chunks(gx.numel(), [&](int64_t lo, int64_t hi) {
      gx.flat().segment(lo, hi - lo) += self.grad.flat().segment(lo, hi - lo).cwiseProduct(keep.flat().segment(lo, hi - lo));
    });
  });
  if (records_second_order(r))
    r.node()->graph_backward = [keep = Var(std::move(keep_for_graph))](const std::vector<Var>&, const Var&,
                                                                      const Var& g) {
      return std::vector<Var>{mul(g, keep)};
    };
  return r;
}

}  // namespace attnlab
