#include "framework/nn/embedding.h"

#include <string>

#include "framework/ops/embedding.h"

namespace attnlab {

Embedding::Embedding(int64_t num_embeddings, int64_t d, Rng& init) : v_(num_embeddings), d_(d) {
  if (num_embeddings <= 0 || d <= 0)
    throw ValueError("Embedding: sizes must be positive, got V = " + std::to_string(num_embeddings) +
                     ", d = " + std::to_string(d));
  Tensor w({num_embeddings, d});
  for (int64_t i = 0; i < w.numel(); ++i) w[i] = static_cast<Real>(init.normal(0.0, 1.0));
  weight = register_parameter("weight", std::move(w));
}

Var Embedding::forward(const IntTensor& ids) const { return embedding(weight, ids); }

}  // namespace attnlab
