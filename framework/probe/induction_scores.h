#pragma once
// Induction-head scores of a causal self-attention layer (Olsson et al. 2022;
// TransformerLens's prefix-matching and previous-token head detection), read
// from its attention pattern on sequences that hold n random tokens and then
// the same n again. An induction head attends from a token in the repeat to
// the token that followed the same token's earlier occurrence (and so can copy
// it); a previous-token head, which such a head builds on, attends to the
// position just before its own.
#include <cstdint>
#include <vector>

#include "framework/tensor.h"

namespace attnlab {

struct InductionScores {
  int64_t head = 0;
  // Mean over the batch and the n queries i of the repeat, i in [first + n,
  // first + 2n), of w[i, i - n + 1]: the weight on the key right after the
  // earlier occurrence of the token at i (for the repeat's last query that key
  // is the repeat's first token). 1 for a perfect induction head.
  double prefix_matching = 0;
  // Mean over the batch and every query i in [1, T) of w[i, i - 1]: the weight
  // on the previous position (for i = first, the last token before the
  // sequence, e.g. [bos]). 1 for a perfect previous-token head.
  double previous_token = 0;
};

// weights (B, h, T, T): one layer's attention pattern (rows: queries, each
// summing to 1) on sequences whose positions [first, first + n) hold n tokens
// and [first + n, first + 2n) the same n tokens again; positions before
// `first` hold what the model reads first (a decoder's [bos]), any after
// first + 2n are not scored. The n tokens of a sequence should be distinct,
// else "the earlier occurrence" is ambiguous. One entry per head, in order.
// ShapeError unless weights is (B, h, T, T) with T >= first + 2n; ValueError
// for n < 1 or first < 0.
std::vector<InductionScores> induction_scores(const Tensor& weights, int64_t first, int64_t n);

}  // namespace attnlab
