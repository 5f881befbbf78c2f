#include "framework/top_eigenvalue.h"

#include <Eigen/Eigenvalues>
#include <cmath>
#include <limits>
#include <string>

#include "framework/error.h"

namespace attnlab {

namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

void add_scaled(std::vector<double>& w, double c, const std::vector<double>& q) {
  for (size_t i = 0; i < w.size(); ++i) w[i] += c * q[i];
}

void divide(std::vector<double>& w, double by) {
  for (double& x : w) x /= by;
}

// w made orthogonal to every basis vector: classical Gram-Schmidt, done twice
// ("twice is enough"), which keeps the basis orthonormal to rounding.
void reorthogonalise(std::vector<double>& w, const std::vector<std::vector<double>>& basis) {
  for (int pass = 0; pass < 2; ++pass)
    for (const std::vector<double>& q : basis) add_scaled(w, -dot(q, w), q);
}

void check_arguments(const std::vector<double>& start, const TopEigenOptions& o) {
  if (!(o.tolerance > 0)) throw ValueError("top_eigenvalue: tolerance must be > 0, got " + exact_text(o.tolerance));
  if (o.max_iterations < 1)
    throw ValueError("top_eigenvalue: max_iterations must be >= 1, got " + std::to_string(o.max_iterations));
  if (start.empty() || dot(start, start) == 0) throw ValueError("top_eigenvalue: the start vector is empty or zero");
}

// The Ritz pairs of the tridiagonal T (alpha on its diagonal, beta beside it).
struct Ritz {
  double largest, smallest;
  Eigen::VectorXd s;  // T's unit eigenvector of `largest`
};

Ritz ritz(const std::vector<double>& alpha, const std::vector<double>& beta) {
  const Eigen::Index j = static_cast<Eigen::Index>(alpha.size());
  const Eigen::VectorXd diag = Eigen::Map<const Eigen::VectorXd>(alpha.data(), j);
  Eigen::VectorXd sub(std::max<Eigen::Index>(j - 1, 0));
  for (Eigen::Index i = 0; i + 1 < j; ++i) sub[i] = beta[static_cast<size_t>(i)];
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver;
  solver.computeFromTridiagonal(diag, sub, Eigen::ComputeEigenvectors);
  return {solver.eigenvalues()[j - 1], solver.eigenvalues()[0], solver.eigenvectors().col(j - 1)};
}

// A product held a NaN or Inf: every figure NaN, the vector the start's.
TopEigen not_finite(TopEigen out, std::vector<double> start) {
  out.value = out.smallest = out.residual = std::numeric_limits<double>::quiet_NaN();
  out.vector = std::move(start);
  return out;
}

}  // namespace

TopEigen top_eigenvalue(const SymmetricOperator& A, std::vector<double> start, const TopEigenOptions& options) {
  check_arguments(start, options);
  const size_t n = start.size();
  std::vector<std::vector<double>> basis;  // q_1 .. q_j, orthonormal
  std::vector<double> alpha, beta;         // T's diagonal and off-diagonal
  divide(start, std::sqrt(dot(start, start)));
  basis.push_back(std::move(start));
  TopEigen out;
  Ritz r{};
  while (true) {
    std::vector<double> w = A(basis.back());
    if (w.size() != n)
      throw ShapeError("top_eigenvalue: the operator returned " + std::to_string(w.size()) + " values for " +
                       std::to_string(n));
    ++out.iterations;
    alpha.push_back(dot(basis.back(), w));
    if (!std::isfinite(alpha.back())) return not_finite(out, basis.front());  // NaN or Inf: nothing to converge to
    reorthogonalise(w, basis);
    const double b = std::sqrt(dot(w, w));
    r = ritz(alpha, beta);
    out.residual = b * std::abs(r.s[r.s.size() - 1]);
    const double scale = std::max(std::abs(r.largest), std::abs(r.smallest));
    const bool invariant = b <= 1e-14 * scale || basis.size() == n;  // the Krylov space holds no more
    out.converged = invariant || out.residual <= options.tolerance * std::abs(r.largest);
    if (out.converged || out.iterations >= options.max_iterations) break;
    beta.push_back(b);
    divide(w, b);
    basis.push_back(std::move(w));
  }
  out.value = r.largest;
  out.smallest = r.smallest;
  out.vector.assign(n, 0.0);
  for (size_t i = 0; i < basis.size(); ++i) add_scaled(out.vector, r.s[static_cast<Eigen::Index>(i)], basis[i]);
  return out;
}

}  // namespace attnlab
