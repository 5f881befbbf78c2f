#pragma once
// The discrete Fourier spectrum of vectors indexed by a residue a in [0, p):
// how much of an embedding of Z/p varies as cos and sin of 2πka/p, per
// frequency k. After grokking modular addition the token embedding is carried
// by a few key frequencies (Nanda et al. 2023). It knows nothing of tasks: the
// caller picks the p rows.
#include <vector>

#include "framework/tensor.h"

namespace attnlab {

// rows (p, d), p >= 1: row a is the vector of residue a. Returns the norm of
// each frequency k = 0 .. floor(p/2), unnormalised:
//   k >= 1: sqrt(‖Σ_a rows_a cos(2πka/p)‖² + ‖Σ_a rows_a sin(2πka/p)‖²)
//   k = 0:  ‖Σ_a rows_a‖ (the same formula: p times the mean row's norm)
// Frequencies k and p - k have the same norm, so only the first half is
// given; Parseval: Σ_a ‖rows_a‖² = (1/p) Σ_k m_k ‖F_k‖², m_k = 1 for k = 0 and
// k = p/2 (even p), else 2. Computed in double. ShapeError unless rows is 2-d
// with p >= 1.
std::vector<double> fourier_norms(const Tensor& rows);

}  // namespace attnlab
