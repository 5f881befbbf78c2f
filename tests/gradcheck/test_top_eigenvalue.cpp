// The Lanczos eigen-solver (framework/top_eigenvalue.h) on explicit symmetric
// matrices whose spectra are known by construction: diagonal, the same
// diagonal rotated by a random orthogonal Q (A = Q D Qᵀ), a repeated top
// eigenvalue, and negative eigenvalues larger in magnitude than the top one
// (the largest algebraic eigenvalue is asked for, not the largest magnitude).
// Tolerance 1e-10 relative: the residual bound makes the answer at least that
// close; a solver that stops early, picks the wrong end or loses
// orthogonality misses it by orders of magnitude.
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "framework/error.h"
#include "framework/random.h"
#include "framework/top_eigenvalue.h"

using namespace attnlab;

namespace {

SymmetricOperator matrix_operator(const Eigen::MatrixXd& A, int* calls = nullptr) {
  return [A, calls](const std::vector<double>& v) {
    if (calls) ++*calls;
    const Eigen::VectorXd av = A * Eigen::Map<const Eigen::VectorXd>(v.data(), static_cast<Eigen::Index>(v.size()));
    return std::vector<double>(av.data(), av.data() + av.size());
  };
}

std::vector<double> random_vector(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = rng.normal();
  return v;
}

// Q D Qᵀ for a random orthogonal Q (the Q of a random matrix's QR).
Eigen::MatrixXd rotated(const Eigen::VectorXd& d, uint64_t seed) {
  const auto n = d.size();
  const std::vector<double> entries = random_vector(static_cast<size_t>(n * n), seed);
  const Eigen::MatrixXd m = Eigen::Map<const Eigen::MatrixXd>(entries.data(), n, n);
  const Eigen::MatrixXd Q = Eigen::HouseholderQR<Eigen::MatrixXd>(m).householderQ();
  return Q * d.asDiagonal() * Q.transpose();
}

// n eigenvalues evenly spaced in (0, 1], the top one `top`: gaps of 1/n make Lanczos work for it.
Eigen::VectorXd spread(Eigen::Index n, double top) {
  Eigen::VectorXd d(n);
  for (Eigen::Index i = 0; i < n; ++i) d[i] = static_cast<double>(n - i) / static_cast<double>(n);
  d[0] = top;
  return d;
}

double true_residual(const Eigen::MatrixXd& A, const TopEigen& e) {
  const Eigen::Map<const Eigen::VectorXd> y(e.vector.data(), static_cast<Eigen::Index>(e.vector.size()));
  return (A * y - e.value * y).norm();
}

TopEigenOptions tight() {
  TopEigenOptions o;
  o.tolerance = 1e-10;
  o.max_iterations = 300;
  return o;
}

void require_top(const Eigen::MatrixXd& A, double top, uint64_t seed) {
  const TopEigen e = top_eigenvalue(matrix_operator(A), random_vector(static_cast<size_t>(A.rows()), seed), tight());
  INFO("value " << e.value << " after " << e.iterations << " iterations, residual " << e.residual);
  REQUIRE(e.converged);
  REQUIRE(std::abs(e.value - top) <= 1e-10 * std::abs(top));
  REQUIRE(true_residual(A, e) <= 1e-10 * std::abs(top));
  REQUIRE(e.iterations < A.rows());  // found before the Krylov space filled the whole space
}

}  // namespace

TEST_CASE("top_eigenvalue finds a diagonal matrix's largest eigenvalue to 1e-10 relative", "[eigen]") {
  const Eigen::VectorXd d = spread(200, 1.5);
  require_top(d.asDiagonal(), 1.5, 1);
  const TopEigen e = top_eigenvalue(matrix_operator(d.asDiagonal()), random_vector(200, 1), tight());
  REQUIRE(std::abs(e.vector[0]) == Approx(1).margin(1e-9));  // the vector is e_0 (up to sign)
}

TEST_CASE("top_eigenvalue finds a rotated diagonal's largest eigenvalue and its eigenvector", "[eigen]") {
  const Eigen::VectorXd d = spread(150, 2.25);
  const Eigen::MatrixXd A = rotated(d, 7);
  require_top(A, 2.25, 2);
}

TEST_CASE("top_eigenvalue finds a repeated top eigenvalue", "[eigen]") {
  Eigen::VectorXd d = spread(120, 3.0);
  d[1] = d[2] = 3.0;  // threefold
  require_top(rotated(d, 8), 3.0, 3);
}

TEST_CASE("top_eigenvalue finds the largest algebraic eigenvalue when negative ones are larger in magnitude",
          "[eigen]") {
  Eigen::VectorXd d = spread(100, 1.8);
  d[50] = -4.0;
  d[99] = -10.0;
  const Eigen::MatrixXd A = rotated(d, 9);
  require_top(A, 1.8, 4);
  const TopEigen e = top_eigenvalue(matrix_operator(A), random_vector(100, 4), tight());
  REQUIRE(e.smallest >= -10.0 - 1e-9);  // a Ritz value: at or above the smallest eigenvalue
  REQUIRE(e.smallest < -9.0);           // and Lanczos found that end too
}

TEST_CASE("top_eigenvalue honours the tolerance: the residual and the error are within it", "[eigen]") {
  const Eigen::MatrixXd A = rotated(spread(200, 1.2), 10);
  int last_iterations = 0;
  for (double tol : {1e-2, 1e-4, 1e-6, 1e-8, 1e-10}) {
    TopEigenOptions o = tight();
    o.tolerance = tol;
    const TopEigen e = top_eigenvalue(matrix_operator(A), random_vector(200, 5), o);
    INFO("tolerance " << tol << ": value " << e.value << ", residual " << e.residual << ", " << e.iterations);
    REQUIRE(e.converged);
    REQUIRE(e.residual <= tol * e.value);
    REQUIRE(true_residual(A, e) == Approx(e.residual).margin(1e-12));  // the reported residual is the true one
    REQUIRE(std::abs(e.value - 1.2) <= tol * 1.2);
    REQUIRE(e.value <= 1.2 + 1e-12);  // a Ritz value never exceeds λ_max
    REQUIRE(e.iterations >= last_iterations);  // a tighter tolerance takes no fewer products
    last_iterations = e.iterations;
  }
  REQUIRE(last_iterations > 5);  // the tight end did need iterating
}

TEST_CASE("top_eigenvalue stops at max_iterations and says it did not converge", "[eigen]") {
  const Eigen::MatrixXd A = rotated(spread(200, 1.01), 11);
  int calls = 0;
  TopEigenOptions o = tight();
  o.max_iterations = 4;
  const TopEigen e = top_eigenvalue(matrix_operator(A, &calls), random_vector(200, 6), o);
  REQUIRE_FALSE(e.converged);
  REQUIRE(e.iterations == 4);
  REQUIRE(calls == 4);  // one product per iteration
  REQUIRE(e.residual > 1e-10 * e.value);
}

TEST_CASE("top_eigenvalue warm-started from a nearby matrix's eigenvector converges in fewer iterations",
          "[eigen]") {
  const Eigen::MatrixXd A = rotated(spread(200, 1.3), 12);
  const TopEigen before = top_eigenvalue(matrix_operator(A), random_vector(200, 7), tight());
  const std::vector<double> e = random_vector(200 * 200, 13);
  const Eigen::MatrixXd E = Eigen::Map<const Eigen::MatrixXd>(e.data(), 200, 200);
  const Eigen::MatrixXd B = A + 1e-4 * (E + E.transpose());  // the next probe's operator
  const double top_b = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(B).eigenvalues()[199];
  const TopEigen cold = top_eigenvalue(matrix_operator(B), random_vector(200, 7), tight());
  const TopEigen warm = top_eigenvalue(matrix_operator(B), before.vector, tight());
  INFO("cold " << cold.iterations << " iterations, warm " << warm.iterations);
  REQUIRE(warm.converged);
  REQUIRE(std::abs(warm.value - top_b) <= 1e-10 * top_b);
  REQUIRE(warm.iterations < cold.iterations);
}

TEST_CASE("top_eigenvalue started on an eigenvector stops after one product", "[eigen]") {
  const Eigen::VectorXd d = spread(50, 2.0);
  std::vector<double> start(50, 0.0);
  start[0] = 3.0;  // any length: normalised
  const TopEigen e = top_eigenvalue(matrix_operator(d.asDiagonal()), start, tight());
  REQUIRE(e.converged);
  REQUIRE(e.iterations == 1);
  REQUIRE(e.value == Approx(2.0).epsilon(1e-15));
}

TEST_CASE("top_eigenvalue refuses a zero start, a bad tolerance or iteration count (1 is allowed), a wrong-length product",
          "[eigen]") {
  const Eigen::MatrixXd A = Eigen::MatrixXd::Identity(3, 3);
  const std::vector<double> start = {1, 2, 3};
  REQUIRE_THROWS_AS(top_eigenvalue(matrix_operator(A), {}, {}), ValueError);
  REQUIRE_THROWS_AS(top_eigenvalue(matrix_operator(A), {0, 0, 0}, {}), ValueError);
  TopEigenOptions o;
  o.tolerance = 0;
  REQUIRE_THROWS_AS(top_eigenvalue(matrix_operator(A), start, o), ValueError);
  o = {};
  o.max_iterations = 0;
  REQUIRE_THROWS_AS(top_eigenvalue(matrix_operator(A), start, o), ValueError);
  o.max_iterations = 1;  // the least accepted: one product
  REQUIRE(top_eigenvalue(matrix_operator(A), start, o).iterations == 1);
  REQUIRE_THROWS_AS(top_eigenvalue([](const std::vector<double>&) { return std::vector<double>(2); }, start, {}),
                    ShapeError);
}
