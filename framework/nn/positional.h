#pragma once
// Position information added to token embeddings: the fixed sinusoidal table
// of Vaswani et al. and a learned table. (Rotary embeddings act on queries and
// keys instead: see framework/ops/rotary.h and MultiHeadAttentionOptions::rope.)
#include "framework/nn/module.h"
#include "framework/random.h"

namespace attnlab {

// (max_len, d): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)).
// Computed in double, then rounded to Real. Sizes must be positive (ValueError).
Tensor sinusoidal_table(int64_t max_len, int64_t d);

// The sinusoidal table as a parameter-free module, so a model can treat the
// fixed and the learned kind alike.
class SinusoidalPositional : public Module {
 public:
  SinusoidalPositional(int64_t max_len, int64_t d);
  // Rows [offset, offset + T) of the table as a constant (T, d); it broadcasts
  // over the batch when added to (B, T, d). Past max_len: ValueError.
  Var forward(int64_t t_len, int64_t offset = 0) const;
  const Tensor& table() const { return table_; }

 private:
  Tensor table_;  // (max_len, d)
};

// A learned (max_len, d) table, as in BERT and GPT-2. Init N(0, 0.02²) (GPT-2's
// choice, not torch.nn.Embedding's N(0, 1): positions should start as a small
// perturbation of the token embeddings), drawn from `init` row by row.
class LearnedPositional : public Module {
 public:
  LearnedPositional(int64_t max_len, int64_t d, Rng& init);
  // Rows [offset, offset + T) as (T, d), differentiable w.r.t. weight; it
  // broadcasts over the batch when added to (B, T, d). Past max_len: ValueError.
  Var forward(int64_t t_len, int64_t offset = 0) const;
  int64_t max_len() const { return max_len_; }

  Var weight;  // (max_len, d)

 private:
  int64_t max_len_, d_;
};

}  // namespace attnlab
