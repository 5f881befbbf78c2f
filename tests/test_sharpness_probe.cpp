// The sharpness probe (framework/probe/sharpness.h) on losses whose Hessian
// is known by construction: L = ½ Σ c_i θ_i² has H = diag(c), so λ_max(H) =
// max c and, with Adam's P = diag(√v̂ + ε), λ_max(P⁻¹H) = max c_i / P_i, with
// v̂ computed here from the gradients the optimizer was given. The thresholds
// are the closed forms of stability_threshold's comment; the probe leaves the
// parameters and their gradient buffers bitwise as it found them.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>

#include "framework/io/csv.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "framework/optim/optim.h"
#include "framework/probe/sharpness.h"
#include "tests/cli_harness.h"

using namespace attnlab;
using attnlab::testing::TempDir;

namespace {

const std::vector<Real> kCurvature = {3.0f, 1.0f, 0.5f, 2.0f};

struct Quadratic {
  Var theta{Tensor::from({4}, {0.5f, -1.0f, 2.0f, 0.25f}), true};
  Var c{Tensor::from({4}, kCurvature)};
  Var loss() const { return scale(sum(mul(c, mul(theta, theta))), 0.5f); }
  NamedParams named() const { return {{"w", theta}}; }
  // One optimizer step on the loss; returns the gradient it took.
  std::vector<double> step(Optimizer& opt) {
    opt.zero_grad();
    backward(loss());
    std::vector<double> g(theta.grad().data(), theta.grad().data() + 4);
    opt.step();
    return g;
  }
};

std::vector<std::vector<std::string>> rows_of(const std::string& dir) {
  const CsvTable t = read_csv(dir + "/probe_sharpness.csv", 1 << 20);
  REQUIRE(t.columns == SharpnessProbe::columns());
  return t.rows;
}

double at(const std::vector<std::string>& row, const std::string& column) {
  const auto& c = SharpnessProbe::columns();
  const std::string& text = row[static_cast<size_t>(std::find(c.begin(), c.end(), column) - c.begin())];
  return text.empty() ? std::numeric_limits<double>::quiet_NaN() : std::stod(text);
}

}  // namespace

TEST_CASE("stability thresholds: 2/lr, heavy-ball (2+2b)/lr, Nesterov (2+2b)/((1+2b)lr), Adam's 38/lr", "[sharpness]") {
  OptimizerConfig c;
  c.kind = OptimizerKind::sgd;
  c.momentum = 0;
  CHECK(stability_threshold(c, 0.01, false) == Approx(200));
  c.momentum = 0.9;
  CHECK(stability_threshold(c, 0.01, false) == Approx(380));
  c.nesterov = true;
  CHECK(stability_threshold(c, 0.01, false) == Approx(380 / 2.8));
  c = OptimizerConfig{};
  c.kind = OptimizerKind::adam;
  CHECK(stability_threshold(c, 1e-3, true) == Approx(38000));
  c.beta1 = 0.5;
  CHECK(stability_threshold(c, 1e-3, true) == Approx(6000));
  CHECK(std::isnan(stability_threshold(c, 1e-3, false)));  // H under Adam: no threshold
}

TEST_CASE("the sharpness probe finds lambda_max of a known Hessian, 2/lr beside it, and warm-starts", "[sharpness]") {
  TempDir dir("sharpness_sgd");
  Quadratic q;
  OptimizerConfig c;
  c.kind = OptimizerKind::sgd;
  c.lr = 0.1;
  c.weight_decay = 0;
  auto opt = make_optimizer(c, q.named());
  TopEigenOptions o;
  o.tolerance = 1e-4;
  SharpnessProbe probe(dir.path.string(), *opt, c, o, 7);
  q.step(*opt);
  const Tensor grad = q.theta.grad(), value = q.theta.value();
  probe.record(1, [&] { return q.loss(); }, 0.1);
  probe.record(2, [&] { return q.loss(); }, 0.05);
  // Only read: the parameter and its gradient buffer are bitwise as before.
  CHECK(std::equal(value.data(), value.data() + 4, q.theta.value().data()));
  CHECK(std::equal(grad.data(), grad.data() + 4, q.theta.grad().data()));
  const auto rows = rows_of(dir.path.string());
  REQUIRE(rows.size() == 2);  // sgd: the Hessian only
  for (const auto& r : rows) {
    CHECK(r[1] == "hessian");
    CHECK(at(r, "lambda_max") == Approx(3.0).epsilon(1e-4));
    CHECK(at(r, "ritz_min") >= 0.5 - 1e-4);
    CHECK(at(r, "converged") == 1);
    CHECK(at(r, "loss") == Approx(q.loss().item()).epsilon(1e-6));
  }
  CHECK(at(rows[0], "threshold") == Approx(20));  // 2 / 0.1
  CHECK(at(rows[1], "threshold") == Approx(40));  // at the step's own lr
  CHECK(at(rows[0], "iterations") > 1);
  CHECK(at(rows[1], "iterations") == 1);  // warm: started on the eigenvector
}

TEST_CASE("with Adam the probe also finds lambda_max of P^-1 H, P from the bias-corrected second moment",
          "[sharpness]") {
  TempDir dir("sharpness_adam");
  Quadratic q;
  OptimizerConfig c;
  c.kind = OptimizerKind::adamw;
  c.lr = 0.01;
  c.weight_decay = 0;
  c.eps = 1e-3;  // large enough to matter in P
  auto opt = make_optimizer(c, q.named());
  const std::vector<double> g1 = q.step(*opt), g2 = q.step(*opt);
  double want = 0;
  for (size_t i = 0; i < 4; ++i) {
    const double v = (1 - c.beta2) * (c.beta2 * g1[i] * g1[i] + g2[i] * g2[i]);  // after two updates
    const double p = std::sqrt(v / (1 - c.beta2 * c.beta2)) + c.eps;
    want = std::max(want, kCurvature[i] / p);
  }
  TopEigenOptions o;
  o.tolerance = 1e-5;
  SharpnessProbe probe(dir.path.string(), *opt, c, o, 7);
  probe.record(2, [&] { return q.loss(); }, 0.01);
  const auto rows = rows_of(dir.path.string());
  REQUIRE(rows.size() == 2);
  CHECK(rows[0][1] == "hessian");
  CHECK(at(rows[0], "lambda_max") == Approx(3.0).epsilon(1e-4));
  CHECK(std::isnan(at(rows[0], "threshold")));  // written empty
  CHECK(rows[1][1] == "preconditioned");
  CHECK(at(rows[1], "lambda_max") == Approx(want).epsilon(1e-4));
  CHECK(at(rows[1], "threshold") == Approx(3800));  // 38 / 0.01
}

TEST_CASE("the preconditioner is 1/sqrt(sqrt(v_hat) + eps) per element, each parameter at its own step count",
          "[sharpness]") {
  Quadratic q;
  OptimizerConfig c;
  c.kind = OptimizerKind::adam;
  c.weight_decay = 0;
  auto opt = make_optimizer(c, q.named());
  const std::vector<double> g = q.step(*opt);
  const std::vector<Tensor> d = adam_inverse_sqrt_preconditioner(*opt, c);
  REQUIRE(d.size() == 1);
  for (int64_t i = 0; i < 4; ++i) {  // one update: v̂ = g², P = |g| + eps
    const double gi = g[static_cast<size_t>(i)];
    CHECK(d[0][i] == Approx(1 / std::sqrt(std::abs(gi) + c.eps)).epsilon(1e-6));
  }
}
