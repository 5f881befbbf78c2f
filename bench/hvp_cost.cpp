// The sharpness probe's cost (docs/performance.md, "The sharpness probe's cost"): one
// Hessian-vector product (framework/hessian.h) and the gradient graph's build, timed against a
// backward pass of the same loss, on the default model of `attnlab train` (encoder, h 4, V 14,
// T 8, batch 64) at LAYERS and D (d_ff = 4 D), medians of REPS. A program of its own:
//   cmake --build build --target hvp_cost
//   OMP_NUM_THREADS=1 build/hvp_cost [LAYERS [D [REPS]]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "framework/curvature.h"
#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "training/train_state.h"

using namespace attnlab;
using Clock = std::chrono::steady_clock;

template <class F>
double median_s(F f, int reps) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  TrainSettings s = default_settings();
  if (argc > 1) s.model.n_layers = std::atoi(argv[1]);
  if (argc > 2) s.model.d_model = std::atoi(argv[2]), s.model.d_ff = 4 * s.model.d_model;
  finalize(s);
  TrainState state(s);
  const FormattedBatch batch = format_batch(state.batch_format(), to_pairs(state.first_batch()));
  SequenceModel& model = state.model();
  model.eval();
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  auto loss = [&] { return cross_entropy(model.forward(batch.input), batch.targets, ce); };
  const int reps = argc > 3 ? std::atoi(argv[3]) : 41;
  for (int w = 0; w < 5; ++w) { model.zero_grad(); backward(loss()); }
  const double fwd = median_s([&] { Var l = loss(); }, reps);
  const double fb = median_s([&] { model.zero_grad(); backward(loss()); }, reps);
  const double build = median_s([&] { HessianVectorProduct h(loss, state.parameters()); }, reps);
  HessianVectorProduct hvp(loss, state.parameters());
  std::vector<Tensor> v;
  Rng rng(1);
  for (const Var& p : state.parameters()) {
    Tensor t(p.shape());
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.normal());
    v.push_back(t);
  }
  for (int w = 0; w < 3; ++w) hvp.apply(v);
  const double apply = median_s([&] { hvp.apply(v); }, reps);
  const double bwd = fb - fwd;
  std::printf("parameters %lld; medians of %d: forward %.3f ms, forward+backward %.3f ms (backward %.3f ms), "
              "HVP graph build %.3f ms, HVP apply %.3f ms = %.2f backward passes (%.2f forward+backward)\n",
              static_cast<long long>(model.parameter_count()), reps, 1e3 * fwd, 1e3 * fb, 1e3 * bwd, 1e3 * build,
              1e3 * apply, apply / bwd, apply / fb);
}
