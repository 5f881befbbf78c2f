// Embedding lookup: rows of a (V, d) table gathered by integer ids.
#include "framework/ops/embedding.h"

#include <cstring>

#include "framework/ops/broadcast.h"

namespace attnlab {
namespace {

// rows[ids[i]] += g[i] for every i (each row d wide); serial over ids so that
// repeated ids accumulate in a fixed order.
void scatter_add_rows(const Real* g, const std::vector<int32_t>& ids, int64_t d, Real* rows) {
  for (size_t i = 0; i < ids.size(); ++i) {
    Real* row = rows + static_cast<int64_t>(ids[i]) * d;
    const Real* gi = g + static_cast<int64_t>(i) * d;
    for (int64_t j = 0; j < d; ++j) row[j] += gi[j];
  }
}

}  // namespace

Var embedding(const Var& weight, const IntTensor& ids) {
  if (weight.dim() != 2) throw ShapeError("embedding: weight must be (V, d), got " + weight.value().shape_str());
  if (shape_numel(ids.shape) != ids.numel())
    throw ShapeError("embedding: ids of shape " + shape_str(ids.shape) + " hold " + std::to_string(ids.numel()) +
                     " values");
  const int64_t V = weight.size(0), d = weight.size(1);
  for (int32_t id : ids.data)
    if (id < 0 || id >= V)
      throw ValueError("embedding: id " + std::to_string(id) + " out of range for a table of V = " +
                       std::to_string(V) + " rows (ids must be in [0, " + std::to_string(V) + "))");

  Shape out_shape = ids.shape;
  out_shape.push_back(d);
  Tensor out = Tensor::uninitialized(out_shape);
  const Real* w = weight.value().data();
  Real* y = out.data();
  const int64_t n = ids.numel();
#pragma omp parallel for schedule(static) if (n * d >= 2 * detail::kParallelGrain)
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(y + i * d, w + static_cast<int64_t>(ids.data[static_cast<size_t>(i)]) * d,
                static_cast<size_t>(d) * sizeof(Real));

  // The ids are copied into the closure: the caller's may not outlive the graph.
  Var r = make_result(std::move(out), {weight}, "embedding", [id_list = ids.data, d](Node& self) {
    if (self.input_needs_grad(0)) scatter_add_rows(self.grad.data(), id_list, d, self.input_grad(0).data());
  }, ValueReads::none());
  if (records_second_order(r))
    r.node()->graph_backward = [ids](const std::vector<Var>& in, const Var&, const Var& g) {
      return std::vector<Var>{embedding_scatter(g, ids, in[0].size(0))};
    };
  return r;
}

Var embedding_scatter(const Var& grad, const IntTensor& ids, int64_t V) {
  const int64_t d = grad.size(-1);
  Tensor out({V, d});
  scatter_add_rows(grad.value().data(), ids.data, d, out.data());
  // Its own backward gathers: d(sum over rows)/d(grad row i) = the gradient's row ids[i].
  return make_result(std::move(out), {grad}, "embedding_scatter", [id_list = ids.data, d](Node& self) {
    if (!self.input_needs_grad(0)) return;
    Real* gx = self.input_grad(0).data();
    for (size_t i = 0; i < id_list.size(); ++i)
      for (int64_t j = 0; j < d; ++j) gx[static_cast<int64_t>(i) * d + j] += self.grad[static_cast<int64_t>(id_list[i]) * d + j];
  }, ValueReads::none());
}

}  // namespace attnlab
