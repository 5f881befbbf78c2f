// The sharpness of whole tiny models (float64 engine): λ_max of the training
// loss's Hessian by Lanczos over exact Hessian-vector products
// (framework/curvature.h) against the largest eigenvalue of the full Hessian
// built column by column from central differences of gradients, symmetrised
// and solved densely (Eigen). Agreement to 1e-6 relative: the differences are
// accurate to about 1e-9 here, and a Hessian-vector product that misses a
// term, or a solver that stops early, misses by far more. The same for the
// preconditioned D H D with a positive diagonal D (Adam's P^{-1/2}).
#include <Eigen/Dense>

#include "framework/curvature.h"
#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"
#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;

namespace {

TransformerConfig tiny(const std::string& arch) { return testing::model_config(arch, 7, 8, 8, 2, 1, 16); }

TokenPairs tiny_pairs(Arch arch) {
  if (arch == Arch::encoder) return {{{4, 5, 6, 4, 5}, {5, 4, 6, 5, 4}}, {{6, 4, 5}, {4, 5}}};
  if (arch == Arch::decoder) return {{{4, 5}, {5, 4}}, {{6}, {4}}};
  return {{{4, 5, 6, 4}, {6, 5, 4}}, {{5, 6}, {4}}};
}

std::vector<double> gradient(const std::function<Var()>& loss, const std::vector<Var>& params) {
  for (Var p : params) p.zero_grad();
  backward(loss());
  std::vector<double> g;
  for (const Var& p : params)
    for (int64_t i = 0; i < p.numel(); ++i) g.push_back(p.has_grad() ? p.grad()[i] : 0.0);
  return g;
}

// The Hessian (n, n) by central differences of gradients, step h, symmetrised.
Eigen::MatrixXd finite_difference_hessian(const std::function<Var()>& loss, std::vector<Var> params) {
  std::vector<Real*> at;
  for (Var& p : params)
    for (int64_t i = 0; i < p.numel(); ++i) at.push_back(p.value().data() + i);
  const auto n = static_cast<Eigen::Index>(at.size());
  const double h = 1e-5;
  Eigen::MatrixXd H(n, n);
  for (Eigen::Index j = 0; j < n; ++j) {
    const Real keep = *at[static_cast<size_t>(j)];
    *at[static_cast<size_t>(j)] = keep + h;
    const std::vector<double> up = gradient(loss, params);
    *at[static_cast<size_t>(j)] = keep - h;
    const std::vector<double> down = gradient(loss, params);
    *at[static_cast<size_t>(j)] = keep;
    for (Eigen::Index i = 0; i < n; ++i) H(i, j) = (up[static_cast<size_t>(i)] - down[static_cast<size_t>(i)]) / (2 * h);
  }
  return (H + H.transpose()) / 2;
}

std::vector<double> random_start(Eigen::Index n, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = rng.normal();
  return v;
}

void check_sharpness(const std::string& arch) {
  const TransformerConfig config = tiny(arch);
  auto model = make_model(config, /*seed=*/11);
  const FormattedBatch batch = format_batch(batch_format(config, false), tiny_pairs(config.arch));
  const auto loss = [&] { return cross_entropy(model->forward(batch.input), batch.targets); };
  const std::vector<Var> params = model->parameters();
  const Eigen::MatrixXd H = finite_difference_hessian(loss, params);
  const Eigen::Index n = H.rows();
  TopEigenOptions o;
  o.tolerance = 1e-9;
  o.max_iterations = 300;
  HessianVectorProduct hvp(loss, params);
  const TopEigen e = largest_curvature(hvp, {}, random_start(n, 3), o);
  const double want = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(H, Eigen::EigenvaluesOnly).eigenvalues()[n - 1];
  INFO(arch << ": " << n << " parameters; Lanczos " << e.value << " in " << e.iterations << " products; dense " << want);
  REQUIRE(e.converged);
  REQUIRE(std::abs(e.value - want) <= 1e-6 * std::abs(want));
  // Preconditioned: D H D for a positive diagonal D, one tensor per parameter.
  std::vector<Tensor> scale;
  Rng rng(5);
  Eigen::VectorXd d(n);
  Eigen::Index k = 0;
  for (const Var& p : params) {
    Tensor t(p.shape());
    for (int64_t i = 0; i < t.numel(); ++i) d[k++] = t[i] = rng.uniform(0.2, 3.0);
    scale.push_back(std::move(t));
  }
  const TopEigen pe = largest_curvature(hvp, scale, random_start(n, 4), o);
  const Eigen::MatrixXd DHD = d.asDiagonal() * H * d.asDiagonal();
  const double want_p = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(DHD, Eigen::EigenvaluesOnly).eigenvalues()[n - 1];
  INFO("preconditioned: Lanczos " << pe.value << " in " << pe.iterations << " products; dense " << want_p);
  REQUIRE(pe.converged);
  REQUIRE(std::abs(pe.value - want_p) <= 1e-6 * std::abs(want_p));
}

}  // namespace

TEST_CASE("lambda_max of an encoder's loss equals the finite-difference Hessian's largest eigenvalue",
          "[gradcheck][sharpness]") {
  check_sharpness("encoder");
}

TEST_CASE("lambda_max of a decoder's loss equals the finite-difference Hessian's largest eigenvalue",
          "[gradcheck][sharpness]") {
  check_sharpness("decoder");
}

TEST_CASE("lambda_max of an encoder-decoder's loss equals the finite-difference Hessian's largest eigenvalue",
          "[gradcheck][sharpness]") {
  check_sharpness("seq2seq");
}
