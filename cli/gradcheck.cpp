// attnlab gradcheck: the whole model's analytic gradients against central
// finite differences of its loss on one random batch.
//
// The engine here is float32, so the check is built to see a wrong gradient
// through float32 noise:
//   - the loss for the differences is recomputed from the logits in double
//     (log-softmax and the mean over targets), so only the forward pass's own
//     rounding is left, about 1e-7 of each logit;
//   - the step is large (eps = 1e-2 by default): the rounding noise in the
//     difference quotient shrinks like 1/eps, the truncation error of the
//     central difference grows like eps² · f''' — for these smooth, O(1)-scaled
//     functions 1e-2 keeps both near 1e-5 of the loss scale (ReLU kinks crossed
//     by a step add a small error of the same order);
//   - the divisor is the step actually taken ((w+eps) − (w−eps) in float32);
//   - each tensor is checked at a random subset of its elements (--samples),
//     so every tensor is covered at a few seconds' cost;
//   - an element's error is the part of |a − n| above the float32 noise of
//     the quotient (2^-24 |L| / h), relative to max(|a|, |n|, atol), with atol
//     a fraction (--atol-frac, 1e-2) of the largest gradient in the model, so
//     elements whose true gradient is ~0 are judged on an absolute scale
//     rather than dividing noise by noise;
//   - ReLU kinks: a step that crosses a kink averages two slopes and misses
//     the analytic gradient (the slope on the weight's side) by up to one
//     token's whole contribution. Such an element shows one-sided differences
//     that disagree with each other beyond curvature and noise; it is retried
//     with the step divided by 4 (twice at most), which a kink at a fixed
//     distance eventually leaves, and counted in the "kinks" column.
// A factor-of-1.1 error in one tensor's gradient gives errors near 0.09 on
// every element above atol; the default tolerance is 1e-2.
//
// Test seam (cli/test_seams.h): set_gradcheck_break_for_tests(NAME) multiplies
// that parameter's analytic gradient by 1.1 after backward, standing in for a
// wrong backward so that tests can see the check fail.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>

#include "cli/command_line.h"
#include "cli/test_seams.h"
#include "cli/train_options.h"
#include "datasets/splits.h"
#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "training/train_state.h"

namespace attnlab::cli {

namespace {

std::string& gradcheck_break() {
  static std::string parameter;
  return parameter;
}

// Mean cross-entropy over the targets that are not ignored, in double.
double loss_in_double(const Tensor& logits, const IntTensor& targets) {
  const int64_t V = logits.size(-1), rows = logits.numel() / V;
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets.data[static_cast<size_t>(r)];
    if (t == kIgnoreTarget) continue;
    const Real* x = logits.data() + r * V;
    double m = x[0];
    for (int64_t j = 1; j < V; ++j) m = std::max(m, static_cast<double>(x[j]));
    double s = 0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(static_cast<double>(x[j]) - m);
    total += m + std::log(s) - static_cast<double>(x[t]);
    ++counted;
  }
  return counted > 0 ? total / static_cast<double>(counted) : 0.0;
}

// Up to n distinct indices in [0, size), in increasing order.
std::vector<int64_t> sample_indices(int64_t size, int64_t n, Rng& rng) {
  std::vector<int64_t> idx(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) idx[static_cast<size_t>(i)] = i;
  if (n >= size) return idx;
  for (int64_t i = 0; i < n; ++i) std::swap(idx[static_cast<size_t>(i)], idx[static_cast<size_t>(rng.integer(i, size - 1))]);
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  return idx;
}

struct TensorResult {
  std::string name;
  int64_t checked = 0;
  int64_t kinks = 0;  // elements retried with a shorter step (a kink inside the first)
  double max_abs_grad = 0;  // over the checked elements, analytic
  double max_abs_err = 0;
  double max_rel_err = 0;
};

}  // namespace

void set_gradcheck_break_for_tests(std::string parameter) { gradcheck_break() = std::move(parameter); }

int run_gradcheck(const Args& args) {
  TrainSettings s = default_settings();
  // GELU by default: a ReLU network's loss has a kink wherever a unit's
  // pre-activation crosses 0, and with thousands of units per batch float32
  // steps long enough to beat rounding noise cross some (relu's own backward
  // is checked off the kink in the float64 layer tests). --activation relu
  // still works; its failures then show up in the "kinks" column.
  s.model.activation = "gelu";
  int64_t samples = 16, batch_size = 4;
  double eps = 1e-2, tol = 1e-2, atol_frac = 1e-2;
  uint64_t seed = 0;
  OptionSet check("Gradient check");
  check.add("samples", &samples, "elements checked per parameter tensor (all when the tensor is smaller)")
      .add("batch-size", &batch_size, "sequences in the random batch")
      .add("eps", &eps, "finite-difference step (absolute)")
      .add("tol", &tol, "fail when any relative error exceeds this")
      .add("atol-frac", &atol_frac, "floor of the relative error's denominator, as a fraction of the largest gradient")
      .add("seed", &seed, "seed of the model, the batch and the sampled elements");
  po::options_description all = options_with_help();
  all.add(check.description()).add(task_options(s.task).description()).add(model_options(s).description());
  po::variables_map vm;
  if (!parse_command_line(args, all, vm,
                          "usage: attnlab gradcheck [model and task options of train] [options]\n\n"
                          "Checks every parameter tensor's analytic gradient of the training loss against central\n"
                          "finite differences on one random batch (float32 engine: the loss is recomputed in double\n"
                          "from the logits, eps is large, a random subset of elements is checked, ReLU kinks are\n"
                          "stepped around, and errors within float32 noise are not counted). Prints the\n"
                          "max relative error per tensor; exits 1 if any exceeds --tol. Dropout is off (eval mode);\n"
                          "the activation defaults to gelu here (ReLU kinks defeat float32 finite differences).\n\n",
                          "\nexamples:\n  attnlab gradcheck --model seq2seq --layers 1 --d-model 32\n"
                          "  attnlab gradcheck --model decoder --positional rope --samples 64\n"))
    return kExitOk;
  if (samples < 1) throw ValueError("--samples must be >= 1, got " + std::to_string(samples));
  if (batch_size < 1 || batch_size > 4096) throw ValueError("--batch-size must be in [1, 4096], got " + std::to_string(batch_size));
  if (!(eps > 0) || !(tol > 0) || !(atol_frac >= 0))
    throw ValueError("--eps and --tol must be > 0 and --atol-frac >= 0");
  s.seed = seed;
  finalize(s);
  if (s.model.activation == "relu")
    std::cerr << "attnlab gradcheck: note: with --activation relu, steps that cross ReLU kinks can fail elements whose "
                 "gradient is right (see the kinks column); the default gelu has no kinks\n";
  omp_set_num_threads(1);

  auto task = make_task(s.task);
  auto model = make_model(s.model, derive_seed(seed, kInitStream));
  model->eval();  // no dropout: the loss must be a function of the weights alone
  Rng rng(derive_seed(seed, 7));
  std::vector<Example> examples;
  for (int64_t i = 0; i < batch_size; ++i) examples.push_back(task->sample(rng));
  FormattedBatch batch = format_batch(s.model.arch, to_pairs(examples));
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;

  model->zero_grad();
  Var loss = cross_entropy(model->forward(batch.input), batch.targets, ce);
  backward(loss);
  const auto params = model->named_parameters();
  if (const std::string& broken = gradcheck_break(); !broken.empty()) {
    Var p = model->parameter(broken);  // ValueError naming it if absent
    if (p.has_grad()) p.grad().flat() *= Real(1.1);
    std::cerr << "attnlab gradcheck: test fault: the gradient of " << broken << " is scaled by 1.1\n";
  }

  NoGradGuard no_grad;
  auto loss_at = [&] { return loss_in_double(model->forward(batch.input).value(), batch.targets); };
  const double l_zero = loss_at();
  // Float32 rounding of the forward pass moves the loss by about half an ulp
  // of its value (2^-24 |L|, measured: the differences of a smooth model stay
  // within a third of this), so a difference quotient over a step h carries
  // noise up to ~2^-24 |L| / h; errors below that are not counted.
  const double noise_level = std::ldexp(std::max(1.0, std::abs(l_zero)), -24);
  double largest = 0;
  for (const auto& [name, p] : params)
    if (p.has_grad()) largest = std::max(largest, static_cast<double>(p.grad().flat().cwiseAbs().maxCoeff()));
  const double atol = atol_frac * largest;
  auto denominator = [atol](double a, double n) { return std::max({std::abs(a), std::abs(n), atol, 1e-300}); };

  bool ok = true;
  std::vector<TensorResult> results;
  for (const auto& [name, p] : params) {
    Var v = p;
    TensorResult r;
    r.name = name;
    for (int64_t i : sample_indices(v.numel(), samples, rng)) {
      const double analytic = v.has_grad() ? static_cast<double>(v.grad()[i]) : 0.0;
      const Real w = v.value()[i];
      double h = eps, excess = 0, err = 0;
      for (int attempt = 0; attempt < 3; ++attempt, h /= 4) {
        const Real plus = static_cast<Real>(w + h), minus = static_cast<Real>(w - h);
        v.value()[i] = plus;
        const double l_plus = loss_at();
        v.value()[i] = minus;
        const double l_minus = loss_at();
        v.value()[i] = w;
        const double central = (l_plus - l_minus) / (static_cast<double>(plus) - static_cast<double>(minus));
        const double forward = (l_plus - l_zero) / (static_cast<double>(plus) - static_cast<double>(w));
        const double backward = (l_zero - l_minus) / (static_cast<double>(w) - static_cast<double>(minus));
        const double noise = noise_level / h;
        err = std::abs(analytic - central);
        excess = std::max(0.0, err - noise) / denominator(analytic, central);
        // A kink (ReLU) inside the step: the one-sided slopes disagree by more
        // than smooth curvature and noise explain. Retry with a shorter step,
        // which a kink at a fixed distance eventually leaves.
        const bool kink = std::abs(forward - backward) > tol * denominator(analytic, central) + 4 * noise;
        if (excess <= tol || !kink) break;
        if (attempt == 0) ++r.kinks;
      }
      r.max_abs_grad = std::max(r.max_abs_grad, std::abs(analytic));
      r.max_abs_err = std::max(r.max_abs_err, err);
      r.max_rel_err = std::max(r.max_rel_err, excess);
      ++r.checked;
    }
    ok = ok && r.max_rel_err <= tol;
    results.push_back(r);
  }
  size_t width = 10;
  for (auto& r : results) width = std::max(width, r.name.size());
  std::cout << std::left << std::setw(static_cast<int>(width)) << "parameter" << std::right << std::setw(9) << "checked"
            << std::setw(13) << "max|grad|" << std::setw(13) << "max abs err" << std::setw(13) << "max rel err"
            << std::setw(7) << "kinks" << "\n";
  for (const TensorResult& r : results) {
    const bool pass = r.max_rel_err <= tol;
    std::cout << std::left << std::setw(static_cast<int>(width)) << r.name << std::right << std::setw(9) << r.checked
              << std::scientific << std::setprecision(3) << std::setw(13) << r.max_abs_grad << std::setw(13)
              << r.max_abs_err << std::setw(13) << r.max_rel_err << std::setw(7) << r.kinks << (pass ? "" : "  FAIL")
              << std::defaultfloat << "\n";
  }
  std::cout << (ok ? "gradcheck passed" : "gradcheck FAILED") << ": " << results.size() << " tensors, eps " << eps
            << ", tolerance " << tol << " (atol " << std::scientific << std::setprecision(2) << atol << ")\n";
  return ok ? kExitOk : kExitFailure;
}

}  // namespace attnlab::cli
