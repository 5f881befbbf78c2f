#pragma once
// The largest eigenvalue of a symmetric linear operator, given only as
// v -> Av: Lanczos with full reorthogonalisation (every new direction is made
// orthogonal to all the earlier ones, twice), so that no spurious copies of
// converged eigenvalues appear; at the tens of iterations a probe affords,
// keeping every direction costs iterations x n doubles.
//
// After j products the Krylov basis Q (n, j) and the tridiagonal T = QᵀAQ
// (j, j) give Ritz pairs (θ, y = Qs). The largest θ never exceeds λ_max, and
// ||Ay − θy|| = β_j |s_j| exactly (in exact arithmetic), so some eigenvalue
// of A lies within that residual of θ; once Lanczos has found the top, λ_max − θ
// is at most residual² / (gap to the next eigenvalue). The run stops when
// residual <= tolerance · |θ| (converged), or after max_iterations products.
// A start vector near the answer (the previous probe's) converges sooner.
//
//   TopEigenOptions o;            // tolerance 1e-3, max_iterations 20
//   TopEigen e = top_eigenvalue([&](const std::vector<double>& v) { return A * v; }, start, o);
//   // e.value, e.vector (unit), e.iterations, e.converged
//
// Computed in double whatever the engine's Real is: the operator's own
// precision is what limits the answer.
#include <functional>
#include <vector>

namespace attnlab {

// v -> Av for a symmetric A; v and Av have the same length n.
using SymmetricOperator = std::function<std::vector<double>(const std::vector<double>&)>;

struct TopEigenOptions {
  double tolerance = 1e-3;  // stop when ||Ay − θy|| <= tolerance · |θ|
  int max_iterations = 20;  // products Av at most (>= 1)
};

struct TopEigen {
  double value = 0;            // θ: the largest Ritz value, <= λ_max
  std::vector<double> vector;  // y: its unit Ritz vector (n)
  double residual = 0;         // ||Ay − θy||
  double smallest = 0;         // the smallest Ritz value: A has an eigenvalue at or below it
  int iterations = 0;          // products Av made
  bool converged = false;      // residual <= tolerance · |θ|, or the Krylov space became invariant
};

// ValueError when `start` is empty or zero, tolerance is not positive or
// max_iterations < 1; ShapeError when A returns a vector of another length.
TopEigen top_eigenvalue(const SymmetricOperator& A, std::vector<double> start, const TopEigenOptions& options);

}  // namespace attnlab
