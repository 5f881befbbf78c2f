#pragma once
// Embedding: a (V, d) table of learned vectors looked up by id.
#include "framework/nn/module.h"
#include "framework/random.h"

namespace attnlab {

class Embedding : public Module {
 public:
  // Init as torch.nn.Embedding's default: weight ~ N(0, 1), drawn from `init`
  // row by row. Sizes must be positive (ValueError naming them otherwise).
  Embedding(int64_t num_embeddings, int64_t d, Rng& init);

  // ids (...) in [0, V) -> (..., d). An id out of range throws ValueError.
  Var forward(const IntTensor& ids) const;

  int64_t num_embeddings() const { return v_; }
  int64_t dim() const { return d_; }

  Var weight;  // (V, d)

 private:
  int64_t v_, d_;
};

}  // namespace attnlab
