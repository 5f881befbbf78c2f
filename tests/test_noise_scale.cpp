// The gradient noise scale (training/noise_scale.h): the estimators of
// McCandlish et al. 2018 (Appendix A.1) against a problem whose |G|² and
// tr(Σ) are known in closed form, their moving averages, and the squared
// norms a training step records for them.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "datasets/task.h"
#include "framework/ops/loss.h"
#include "models/batch.h"
#include "training/noise_scale.h"
#include "training/step.h"

using namespace attnlab;

namespace {

// The loss ½|θ − x_i|² over a fixed set of N examples x_i in R^d: example i's
// gradient is θ − x_i, so the true gradient is G = θ − x̄ and the covariance
// of one example's gradient is that of x: tr(Σ) = Σ_j var(x_j) (over the set,
// dividing by N). A batch draws its examples uniformly with replacement.
struct QuadraticProblem {
  static constexpr int kN = 40, kD = 5;
  std::vector<std::vector<double>> x;  // (N, d)
  std::vector<double> theta;           // (d)

  QuadraticProblem() {
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal;
    theta = {0.5, -0.3, 0.2, 0.4, -0.1};
    for (int i = 0; i < kN; ++i) {
      std::vector<double> xi(kD);
      for (int j = 0; j < kD; ++j) xi[static_cast<size_t>(j)] = (j + 1) * 0.6 * normal(rng);
      x.push_back(xi);
    }
  }
  double mean(int j) const {
    double m = 0;
    for (const auto& xi : x) m += xi[static_cast<size_t>(j)];
    return m / kN;
  }
  double true_grad_sq() const {
    double s = 0;
    for (int j = 0; j < kD; ++j) s += std::pow(theta[static_cast<size_t>(j)] - mean(j), 2);
    return s;
  }
  double true_trace() const {
    double s = 0;
    for (int j = 0; j < kD; ++j)
      for (const auto& xi : x) s += std::pow(xi[static_cast<size_t>(j)] - mean(j), 2) / kN;
    return s;
  }
  // The mean gradient of b examples drawn with replacement: (d)
  std::vector<double> batch_gradient(int b, std::mt19937_64& rng) const {
    std::uniform_int_distribution<int> pick(0, kN - 1);
    std::vector<double> g(kD, 0.0);
    for (int n = 0; n < b; ++n) {
      const auto& xi = x[static_cast<size_t>(pick(rng))];
      for (int j = 0; j < kD; ++j) g[static_cast<size_t>(j)] += (theta[static_cast<size_t>(j)] - xi[static_cast<size_t>(j)]) / b;
    }
    return g;
  }
};

double squared(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e * e;
  return s;
}

// Mean and standard error of the mean of `values`.
struct Sample {
  double mean = 0, standard_error = 0;
};
Sample sample_of(const std::vector<double>& values) {
  const double n = static_cast<double>(values.size());
  Sample out;
  for (double v : values) out.mean += v / n;
  double var = 0;
  for (double v : values) var += (v - out.mean) * (v - out.mean) / (n - 1);
  out.standard_error = std::sqrt(var / n);
  return out;
}

}  // namespace

TEST_CASE("noise_estimates inverts E|G_B|² = |G|² + tr(Σ)/B at two batch sizes exactly", "[noise_scale]") {
  const double g2 = 1.75, tr = 12.5;
  const auto [b_small, b_big] = GENERATE(std::pair<double, double>{3, 12}, std::pair<double, double>{8, 16},
                                         std::pair<double, double>{1, 1024});
  const NoiseEstimates e = noise_estimates(g2 + tr / b_small, g2 + tr / b_big, b_small, b_big);
  CHECK(e.grad_sq == Approx(g2).epsilon(1e-12));
  CHECK(e.trace == Approx(tr).epsilon(1e-12));
  CHECK_THROWS_AS(noise_estimates(1, 1, 4, 4), std::logic_error);  // one batch size: nothing to tell apart
}

TEST_CASE("over random micro-batch draws of ½|θ − x_i|², the estimators average to the closed-form |G|² and tr(Σ) "
          "within 4 standard errors, while |G_big|² alone is off by tr(Σ)/B_big",
          "[noise_scale]") {
  const QuadraticProblem problem;
  const double g2 = problem.true_grad_sq(), tr = problem.true_trace();
  const int M = 4, b = 3, draws = 20000;
  std::mt19937_64 rng(2018);
  std::vector<double> grad_sq, trace, big_only;
  for (int r = 0; r < draws; ++r) {
    std::vector<double> micro_sq, big(QuadraticProblem::kD, 0.0);
    for (int k = 0; k < M; ++k) {
      const std::vector<double> g = problem.batch_gradient(b, rng);
      micro_sq.push_back(squared(g));
      for (size_t j = 0; j < g.size(); ++j) big[j] += g[j] / M;  // equal micro-batches: the batch's mean gradient
    }
    // Through the moving average's first step, which is the step's estimate itself.
    NoiseScaleEma ema;
    ema.add(micro_sq, std::sqrt(squared(big)), M * b);
    grad_sq.push_back(ema.grad_sq());
    trace.push_back(ema.trace());
    big_only.push_back(squared(big));
  }
  const Sample g = sample_of(grad_sq), t = sample_of(trace), naive = sample_of(big_only);
  INFO("|G|² " << g2 << " estimated " << g.mean << " ± " << g.standard_error << "; tr(Σ) " << tr << " estimated "
               << t.mean << " ± " << t.standard_error);
  CHECK(std::abs(g.mean - g2) < 4 * g.standard_error);
  CHECK(std::abs(t.mean - tr) < 4 * t.standard_error);
  // The check has power: the tolerance is a few percent, and the biased estimator misses by far more.
  CHECK(4 * g.standard_error < 0.05 * g2);
  CHECK(4 * t.standard_error < 0.05 * tr);
  CHECK(std::abs(naive.mean - g2) > 10 * naive.standard_error);
  CHECK(naive.mean - g2 == Approx(tr / (M * b)).epsilon(0.05));
}

TEST_CASE("the moving averages are debiased EMAs of the two estimators with β = 0.99, B_simple their ratio, and "
          "their state text restores them bit for bit",
          "[noise_scale]") {
  NoiseScaleEma ema;
  CHECK(std::isnan(ema.scale()));
  // Steps whose estimates are known: micro-batches 2 of 4 examples, batch 8.
  const double g2[] = {1.0, 2.0, 0.5}, tr[] = {8.0, 4.0, 16.0};
  double raw_g2 = 0, raw_tr = 0;
  for (int n = 0; n < 3; ++n) {
    const double small = g2[n] + tr[n] / 4, big = g2[n] + tr[n] / 8;
    ema.add({small, small}, std::sqrt(big), 8);
    raw_g2 = 0.99 * raw_g2 + 0.01 * g2[n];
    raw_tr = 0.99 * raw_tr + 0.01 * tr[n];
  }
  const double debias = 1 - std::pow(0.99, 3);
  CHECK(ema.steps() == 3);
  CHECK(ema.grad_sq() == Approx(raw_g2 / debias).epsilon(1e-12));
  CHECK(ema.trace() == Approx(raw_tr / debias).epsilon(1e-12));
  CHECK(ema.scale() == Approx(raw_tr / raw_g2).epsilon(1e-12));  // not the mean of the steps' ratios
  ema.add({1.0}, 1.0, 8);  // one micro-batch: no two batch sizes, the step is left out
  CHECK(ema.steps() == 3);

  NoiseScaleEma restored;
  restored.set_state(ema.state(), "here");
  CHECK(restored.steps() == 3);
  CHECK(restored.grad_sq() == ema.grad_sq());
  CHECK(restored.trace() == ema.trace());
  CHECK_THROWS_WITH(restored.set_state("3 0x1p+0", "ckpt"), "ckpt: malformed noise_scale_ema '3 0x1p+0' in its metadata");
}

namespace {

TrainSettings small_run(int64_t grad_accum, int threads, bool noise) {
  TrainSettings s = default_settings();
  s.task.name = "reverse";
  s.task.vocab = 5;
  s.task.min_len = 2;
  s.task.max_len = 7;
  s.model.d_model = 16;
  s.model.n_heads = 2;
  s.model.n_layers = 1;
  s.model.d_ff = 32;
  s.model.dropout = 0;
  s.batch_size = 12;
  s.grad_accum = grad_accum;
  s.threads = threads;
  s.noise_scale = noise;
  s.heldout = 20;
  s.seed = 5;
  finalize(s);
  return s;
}

// |∇ (mean loss of `examples`)|², computed on its own: forward, loss, backward, squares summed in double.
double separate_squared_norm(TrainState& twin, const std::vector<Example>& examples) {
  const FormattedBatch batch = format_batch(twin.batch_format(), to_pairs(examples));
  twin.model().zero_grad();
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  const Var loss = cross_entropy(twin.model().forward(batch.input), batch.targets, ce);
  backward(loss);
  double sum = 0;
  for (const auto& [name, v] : twin.model().named_parameters())
    if (v.has_grad())
      for (int64_t i = 0; i < v.numel(); ++i) sum += static_cast<double>(v.grad()[i]) * v.grad()[i];
  return sum;
}

}  // namespace

TEST_CASE("a step records each micro-batch's |g|² of its own mean loss, in micro-batch order, as separately "
          "computed gradients have it, on either summation path (copies or threads in place)",
          "[noise_scale][step]") {
  // (grad-accum, threads): 3 x 1 and 2 x 2 sum copies; 1 x 2 sums the two threads' gradients in place.
  const auto [accum, threads] = GENERATE(std::pair<int64_t, int>{3, 1}, std::pair<int64_t, int>{2, 2},
                                         std::pair<int64_t, int>{1, 2});
  const TrainSettings s = small_run(accum, threads, true);
  TrainState state(s), twin(s);
  const StepResult r = train_step(state);
  const int64_t M = accum * threads, b = s.batch_size / M;
  REQUIRE(static_cast<int64_t>(r.micro_grad_sq.size()) == M);
  const std::vector<Example> examples = twin.stream().next_batch(s.batch_size);
  std::vector<double> separate;
  for (int64_t k = 0; k < M; ++k)
    separate.push_back(separate_squared_norm(twin, {examples.begin() + k * b, examples.begin() + (k + 1) * b}));
  for (int64_t k = 0; k < M; ++k) {
    INFO("micro-batch " << k);
    // float32 gradients, the step's scaled by its weight (n_k / n) and divided back out
    CHECK(r.micro_grad_sq[static_cast<size_t>(k)] == Approx(separate[static_cast<size_t>(k)]).epsilon(1e-5));
  }
  // Distinct enough that an order or a weighting mix-up would show.
  CHECK(std::abs(separate[0] / separate[1] - 1) > 1e-3);
}

TEST_CASE("recording the noise scale changes no bit of a step: its loss, norm and updated parameters are the same on and off, "
          "and off records nothing",
          "[noise_scale][step]") {
  const int threads = GENERATE(1, 2);
  TrainState on(small_run(2, threads, true)), off(small_run(2, threads, false));
  for (int step = 0; step < 3; ++step) {
    const StepResult a = train_step(on), b = train_step(off);
    CHECK(a.loss == b.loss);
    CHECK(a.grad_norm == b.grad_norm);
    CHECK(a.micro_grad_sq.size() == static_cast<size_t>(2 * threads));
    CHECK(b.micro_grad_sq.empty());
  }
  const auto pa = on.model().named_parameters(), pb = off.model().named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    for (int64_t e = 0; e < pa[i].second.numel(); ++e) REQUIRE(pa[i].second.value()[e] == pb[i].second.value()[e]);
}
