// attnlab gradcheck: the whole model's analytic gradients against central
// finite differences of its loss on one random batch; the check itself, and
// how it sees a wrong gradient through float32 noise, is
// training/model_gradcheck.h.
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
#include "training/model_gradcheck.h"
#include "training/train_state.h"

namespace attnlab::cli {

namespace {

std::string& gradcheck_break() {
  static std::string parameter;
  return parameter;
}

void print_results(const ModelGradcheck& result, double eps, double tol) {
  size_t width = 10;
  for (const auto& r : result.tensors) width = std::max(width, r.name.size());
  std::cout << std::left << std::setw(static_cast<int>(width)) << "parameter" << std::right << std::setw(9) << "checked"
            << std::setw(13) << "max|grad|" << std::setw(13) << "max abs err" << std::setw(13) << "max rel err"
            << std::setw(7) << "kinks" << "\n";
  for (const TensorGradcheck& r : result.tensors)
    std::cout << std::left << std::setw(static_cast<int>(width)) << r.name << std::right << std::setw(9) << r.checked
              << std::scientific << std::setprecision(3) << std::setw(13) << r.max_abs_grad << std::setw(13)
              << r.max_abs_err << std::setw(13) << r.max_rel_err << std::setw(7) << r.kinks << (r.ok ? "" : "  FAIL")
              << std::defaultfloat << "\n";
  std::cout << (result.ok ? "gradcheck passed" : "gradcheck FAILED") << ": " << result.tensors.size() << " tensors, eps "
            << eps << ", tolerance " << tol << " (atol " << std::scientific << std::setprecision(2) << result.atol << ")\n";
}

// The command line of `gradcheck`: the model and task flags of train, and the check's own.
struct GradcheckArgs {
  int64_t samples = 16, batch_size = 4;
  double eps = 1e-2, tol = 1e-2, atol_frac = 1e-2;
  uint64_t seed = 0;
};

// False after --help.
bool parse_gradcheck(const Args& args, TrainSettings& s, GradcheckArgs& g) {
  // GELU by default: a ReLU network's loss has a kink wherever a unit's
  // pre-activation crosses 0, and with thousands of units per batch float32
  // steps long enough to beat rounding noise cross some (relu's own backward
  // is checked off the kink in the float64 layer tests). --activation relu
  // still works; its failures then show up in the "kinks" column.
  s.model.activation = Activation::gelu;
  OptionSet check("Gradient check");
  check.add("samples", &g.samples, "elements checked per parameter tensor (all when the tensor is smaller)")
      .add("batch-size", &g.batch_size, "sequences in the random batch")
      .add("eps", &g.eps, "finite-difference step (absolute)")
      .add("tol", &g.tol, "fail when any relative error exceeds this")
      .add("atol-frac", &g.atol_frac, "floor of the relative error's denominator, as a fraction of the largest gradient")
      .add("seed", &g.seed, "seed of the model, the batch and the sampled elements");
  po::options_description all = options_with_help();
  all.add(check.description()).add(option_group(OptionGroup::task, s).description())
      .add(option_group(OptionGroup::model, s).description());
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
    return false;
  if (g.samples < 1) throw ValueError("--samples must be >= 1, got " + std::to_string(g.samples));
  if (g.batch_size < 1 || g.batch_size > 4096) throw ValueError("--batch-size must be in [1, 4096], got " + std::to_string(g.batch_size));
  if (!(g.eps > 0) || !(g.tol > 0) || !(g.atol_frac >= 0))
    throw ValueError("--eps and --tol must be > 0 and --atol-frac >= 0");
  return true;
}

}  // namespace

void set_gradcheck_break_for_tests(std::string parameter) { gradcheck_break() = std::move(parameter); }

int run_gradcheck(const Args& args) {
  TrainSettings s = default_settings();
  GradcheckArgs g;
  if (!parse_gradcheck(args, s, g)) return kExitOk;
  const uint64_t seed = g.seed;
  s.seed = seed;
  finalize(s);
  if (s.model.activation == Activation::relu)
    std::cerr << "attnlab gradcheck: note: with --activation relu, steps that cross ReLU kinks can fail elements whose "
                 "gradient is right (see the kinks column); the default gelu has no kinks\n";
  omp_set_num_threads(1);

  auto task = make_task(s.task);
  auto model = make_model(s.model, derive_seed(seed, kInitStream));
  model->eval();  // no dropout: the loss must be a function of the weights alone
  Rng rng(derive_seed(seed, 7));
  std::vector<Example> examples;
  for (int64_t i = 0; i < g.batch_size; ++i) examples.push_back(task->sample(rng));
  FormattedBatch batch = format_batch(batch_format(s.model, false), to_pairs(examples));
  ModelGradcheckOptions options;
  options.samples = g.samples;
  options.eps = g.eps;
  options.tol = g.tol;
  options.atol_frac = g.atol_frac;
  if (const std::string broken = gradcheck_break(); !broken.empty())
    options.after_backward = [broken](Module& m) {
      Var p = m.parameter(broken);  // ValueError naming it if absent
      if (p.has_grad()) p.grad().flat() *= Real(1.1);
      std::cerr << "attnlab gradcheck: test fault: the gradient of " << broken << " is scaled by 1.1\n";
    };
  const ModelGradcheck result = check_model_gradients(*model, batch, options, rng);
  print_results(result, g.eps, g.tol);
  return result.ok ? kExitOk : kExitFailure;
}

}  // namespace attnlab::cli
