#pragma once
// Private to framework/ops: a backward's gradient buffer whose first
// contribution is a product can skip the zero-fill. A backward always
// accumulates (+=) into an input's gradient; when nothing has been accumulated
// there yet (no buffer, as for every intermediate result on its first
// contribution), "+= x" into zeros is "= x", so the buffer is taken
// uninitialised and the product overwrites it (beta = 0). The caller must then
// write every element before anything reads the buffer, and must ask again
// (grad_target) before a second write into the same input: an op whose inputs
// are one and the same node sees the buffer fresh only the first time.
#include "framework/autograd.h"

namespace attnlab::detail {

struct GradTarget {
  Tensor* grad;
  bool fresh;  // uninitialised: the first write must overwrite every element
};

inline GradTarget grad_target(Node& self, size_t i) {
  Node& in = *self.inputs[i];
  const bool fresh = in.grad.empty() || in.grad.shape() != in.value.shape();
  if (fresh) in.grad = Tensor::uninitialized(in.value.shape());
  return {&in.grad, fresh};
}

}  // namespace attnlab::detail
