// The training benchmark: timed training steps of docs/benchmark.md's encoder
// tagger (pre-LN, sinusoidal positions, biases everywhere, no dropout) with
// AdamW (lr 1e-3, wd 0.01), learning to reverse random sequences. A few fixed
// random batches are made before timing; the warm-up steps are not timed. One
// JSON line is printed.
//
// MFU: achieved model FLOP/s over the fp32 FMA peak measured here with the
// same threads (bench/fma_peak.h: a calibrated loop of independent vector FMAs
// timed by each thread's CPU clock, the best of bursts taken before, between
// and after the timed steps), so it is a share of what the cores can do at
// all; the steps are timed by the wall clock, which preemption only lengthens,
// so MFU cannot exceed 1. Beside it, gemm_peak_gflops: the best of the engine's
// own matrix product (framework/ops/gemm.h, the backend named in
// gemm_backend) on 512² and 1024², and gemm_mfu against that; where the CPU
// has AVX512_BF16, bf16_dot_peak_gflops (its dot-product loop's peak, timed
// alike) and, with --precision bf16, mfu_bf16 against it. Every line starts
// with the CPU (bench/cpu_info.h), the products' kernel and their precision.
#include "bench/training.h"

#include <omp.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/cpu_info.h"
#include "bench/fma_peak.h"
#include "bench/gemm_replay.h"
#include "bench/timing.h"
#include "framework/ops/gemm.h"
#include "framework/ops/gemm_log.h"
#include "framework/ops/loss.h"
#include "framework/optim/optim.h"
#include "models/sequence_model.h"
#include "training/thread_slices.h"

namespace attnlab::bench {

namespace {

// Best GFLOP/s of C = A·B (row-major float, through gemm()) at n = 512 and 1024.
double measure_gemm_peak() {
  double best = 0;
  for (int64_t n : {512, 1024}) {
    Tensor a({n, n}, 0.5f), b({n, n}, 0.25f), c({n, n});
    auto product = [&] { gemm({c.data(), n, n, n}, {a.data(), n, n, n}, {b.data(), n, n, n}, 1, false); };
    product();  // warm-up
    for (int rep = 0; rep < 3; ++rep) {
      auto t = Clock::now();
      int iters = n == 512 ? 8 : 2;
      for (int i = 0; i < iters; ++i) product();
      double s = seconds_since(t);
      best = std::max(best, 2.0 * static_cast<double>(n * n * n) * iters / s / 1e9);
    }
  }
  return best;
}

// One burst of the FMA loop: 10 runs of ~5 ms of CPU time on each thread, the
// best kept in `peak` (timed by each thread's CPU time, so other work
// preempting it on a shared machine does not lower the peak; the measurements
// behind this are in docs/performance.md, "The FMA peak").
void fma_burst(FmaPeak& peak, int threads) { peak = measure_fma_peak(threads, 10, 0.005, peak); }

// A few fixed batches: x uniform in [0, V), y = x reversed along T.
void make_batches(const Shape& shape, uint64_t seed, std::vector<ModelInput>& inputs,
                  std::vector<IntTensor>& targets) {
  Rng rng(seed + 1);
  inputs.assign(4, ModelInput{});
  targets.assign(4, IntTensor{});
  const int64_t B = shape.B, T = shape.T;
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i].src = IntTensor({B, T});
    targets[i] = IntTensor({B, T});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        inputs[i].src.data[static_cast<size_t>(b * T + t)] = static_cast<int32_t>(rng.integer(0, shape.V - 1));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        targets[i].data[static_cast<size_t>(b * T + t)] = inputs[i].src.data[static_cast<size_t>(b * T + T - 1 - t)];
  }
}

// Rows [lo, hi) of a (B, T) batch.
IntTensor rows(const IntTensor& x, int64_t lo, int64_t hi) {
  const int64_t T = x.shape[1];
  IntTensor out({hi - lo, T});
  std::copy(x.data.begin() + lo * T, x.data.begin() + hi * T, out.data.begin());
  return out;
}

bool uses_batch_slices(const Shape& shape, const TrainingOptions& a) {
  return a.batch_slices && a.threads > 1 && shape.B % a.threads == 0;
}

struct Timings {
  std::vector<double> step_ms;  // timed steps, sorted
  double last_loss = 0;
  uint64_t nodes_per_step = 0;  // autograd nodes one step records (the same every step)
};

// Training steps (forward, backward, AdamW) of the encoder tagger of the shape.
// `between` (when set) runs untimed after a timed step once a quarter second
// has passed since it last ran, and once after the warm-up.
Timings time_steps(const Shape& shape, const TrainingOptions& a, SequenceModel& model, int64_t steps,
                   const std::function<void()>& between) {
  OptimizerConfig oc;  // AdamW, lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0.01
  auto optimizer = make_optimizer(oc, model.named_parameters());
  std::vector<ModelInput> inputs;
  std::vector<IntTensor> targets;
  make_batches(shape, a.seed, inputs, targets);
  // With batch slices: each batch cut into T slices of B / T sequences, one per thread.
  const int64_t T = a.threads;
  std::unique_ptr<ThreadSlices> slices;
  std::vector<std::vector<ModelInput>> slice_inputs;
  std::vector<std::vector<IntTensor>> slice_targets;
  std::vector<double> slice_losses(static_cast<size_t>(T));
  if (uses_batch_slices(shape, a)) {
    slices = std::make_unique<ThreadSlices>(model, a.threads);
    for (size_t b = 0; b < inputs.size(); ++b) {
      slice_inputs.emplace_back();
      slice_targets.emplace_back();
      for (int64_t k = 0; k < T; ++k) {
        ModelInput slice;
        slice.src = rows(inputs[b].src, k * shape.B / T, (k + 1) * shape.B / T);
        slice_inputs.back().push_back(slice);
        slice_targets.back().push_back(rows(targets[b], k * shape.B / T, (k + 1) * shape.B / T));
      }
    }
  }
  Timings out;
  auto last_between = Clock::now();
  for (int64_t step = 0; step < a.warmup + steps; ++step) {
    if (between && (step == a.warmup || (step > a.warmup && seconds_since(last_between) >= 0.25))) {
      between();
      last_between = Clock::now();
    }
    size_t i = static_cast<size_t>(step) % inputs.size();
    auto t = Clock::now();
    const uint64_t nodes_before = nodes_created();
    if (slices) {
      slices->sum_in_place(T, [&](SequenceModel& on, int64_t k) {
        on.zero_grad();
        Var loss = cross_entropy(on.forward(slice_inputs[i][static_cast<size_t>(k)]), slice_targets[i][static_cast<size_t>(k)]);
        backward(loss, Real(1) / static_cast<Real>(T));  // every slice holds B·T / T targets
        slice_losses[static_cast<size_t>(k)] = loss.item();
      });
      out.last_loss = 0;
      for (double l : slice_losses) out.last_loss += l / static_cast<double>(T);
    } else {
      model.zero_grad();
      Var loss = cross_entropy(model.forward(inputs[i]), targets[i]);
      backward(loss);
      out.last_loss = loss.item();
    }
    out.nodes_per_step = nodes_created() - nodes_before;
    optimizer->step();
    double ms = seconds_since(t) * 1e3;
    if (step >= a.warmup) out.step_ms.push_back(ms);
  }
  std::sort(out.step_ms.begin(), out.step_ms.end());
  return out;
}

// The products of one training step (forward and backward; the optimizer makes none).
std::vector<GemmCall> record_step_products(const Shape& shape, const TrainingOptions& a, SequenceModel& model) {
  std::vector<ModelInput> inputs;
  std::vector<IntTensor> targets;
  make_batches(shape, a.seed, inputs, targets);
  model.zero_grad();
  std::vector<GemmCall> calls;
  {
    GemmLog log;
    backward(cross_entropy(model.forward(inputs[0]), targets[0]));
    calls = log.calls();
  }
  model.zero_grad();
  return calls;
}

// What the step's products alone cost: replayed (best of five) on scratch
// operands, with everything else in the step taken as free. products_mfu_bound
// is the share of the FMA peak a step could reach with these products.
void add_products_bound(nlohmann::json& out, const std::vector<GemmCall>& calls, double step_ms,
                        double model_flops_per_step) {
  const double product_flops = total_flops(calls);
  const double seconds = replay_seconds(calls, 5);
  out["products_per_step"] = calls.size();
  out["product_gflop_per_step"] = product_flops / 1e9;
  out["products_ms"] = seconds * 1e3;
  out["products_share_of_step"] = seconds * 1e3 / step_ms;
  out["products_gflops"] = product_flops / seconds / 1e9;
  out["products_mfu_bound"] = model_flops_per_step / seconds / 1e9 / out["fma_peak_gflops"].get<double>();
}

// The peaks, with MFU against each. No step can run
// faster than the FMA peak; should one seem to, every burst met load on a
// shared machine, so the peak is measured again, longer, before it is used.
void add_peaks(nlohmann::json& out, FmaPeak fma, double gflops, int threads) {
  fma_burst(fma, threads);
  for (int retry = 0; retry < 3 && gflops > fma.gflops; ++retry) fma = measure_fma_peak(threads, 40, 0.005, fma);
  const double gemm_peak = measure_gemm_peak();
  double bf16_peak = 0;
  for (int burst = 0; burst < 3; ++burst) bf16_peak = measure_bf16_dot_peak(threads, 10, 0.005, bf16_peak);
  out["fma_peak_gflops"] = fma.gflops;
  out["fma_lanes"] = fma.lanes;
  out["fma_chains"] = fma.chains;
  out["fma_fused"] = fma.fused;
  out["mfu"] = gflops / fma.gflops;
  out["gemm_peak_gflops"] = gemm_peak;
  out["gemm_mfu"] = gflops / gemm_peak;
  out["bf16_dot_peak_gflops"] = bf16_peak > 0 ? nlohmann::json(bf16_peak) : nlohmann::json(nullptr);
  if (bf16_peak > 0 && gemm_precision() == Precision::bf16) out["mfu_bf16"] = gflops / bf16_peak;
}

}  // namespace

void run_training(const Shape& shape, const TrainingOptions& a) {
  const int64_t steps = a.steps > 0 ? a.steps : shape.steps;
  omp_set_num_threads(a.threads);
  auto model = make_model(encoder_config(shape), a.seed);
  FmaPeak fma;
  std::function<void()> between;
  if (a.peaks) {
    fma_burst(fma, a.threads);
    between = [&] { fma_burst(fma, a.threads); };
  }
  const Timings timed = time_steps(shape, a, *model, steps, between);
  double median = timed.step_ms[timed.step_ms.size() / 2];
  double tokens = static_cast<double>(shape.B * shape.T);
  double tokens_per_s = tokens / (median / 1e3);
  double gflops = 3 * forward_flops_per_token(shape) * tokens_per_s / 1e9;
  nlohmann::json out = cpu_json();
  out.update({{"impl", "attnlab"},        {"config", shape.name},     {"threads", a.threads},
                        {"steps", steps},           {"step_ms", median},        {"tokens_per_s", tokens_per_s},
                        {"params", model->parameter_count()}, {"nodes_per_step", timed.nodes_per_step},
                        {"threads_split", uses_batch_slices(shape, a) ? "batch" : a.threads > 1 ? "ops" : "none"},
                        {"gflops", gflops},         {"final_loss", timed.last_loss},
                        {"precision", name_of(gemm_precision())}, {"gemm_backend", gemm_backend()},
                        {"gemm_kernel", gemm_kernel()}});
  out["peak_rss_mib"] = peak_rss_mib();  // training's, before the peaks' and the replay's own buffers
  std::vector<GemmCall> calls;
  if (a.peaks || a.products_table) calls = record_step_products(shape, a, *model);
  if (a.peaks) {
    add_peaks(out, fma, gflops, a.threads);
    add_products_bound(out, calls, median, gflops * 1e9 * median / 1e3);
  }
  std::cout << out.dump() << std::endl;
  if (a.products_table) print_products_table(calls, std::cout);
}

}  // namespace attnlab::bench
