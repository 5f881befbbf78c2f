// attnlab bench: training throughput on the workload of BENCHMARK.md.
//
// The model is the encoder tagger (pre-LN, sinusoidal positions, biases
// everywhere, no dropout) trained with AdamW (lr 1e-3, wd 0.01) to reverse
// random sequences. A few fixed random batches are made before timing; the
// warm-up steps are not timed. One JSON line is printed.
//
// --config graph is not in BENCHMARK.md: the same 6-layer model at width 4
// on two tokens, so small that its step time is the engine's fixed cost per
// step (building and walking the graph, launching each op, AdamW's loop over
// the parameter list); step_ms / nodes_per_step is the cost of one op.
//
// --decode times greedy decoding instead (cli/bench_decode.cpp): KV-cached
// tokens/s against the uncached reference, at the sizes of --config.
//
// MFU: achieved model FLOP/s over the fp32 FMA peak measured here with the
// same threads (cli/fma_peak.h: a calibrated loop of independent vector FMAs
// timed by each thread's CPU clock, the best of bursts taken before, between
// and after the timed steps), so it is a share of what the cores can do at
// all; the steps are timed by the wall clock, which preemption only lengthens,
// so MFU cannot exceed 1. Beside it, gemm_peak_gflops: the best of the engine's
// own matrix product (framework/ops/gemm.h, the backend named in
// gemm_backend) on 512² and 1024², and gemm_mfu against that.
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/bench_decode.h"
#include "cli/command_line.h"
#include "cli/fma_peak.h"
#include "cli/option_set.h"
#include "framework/ops/gemm.h"
#include "framework/ops/gemm_log.h"
#include "framework/ops/loss.h"
#include "framework/optim/optim.h"
#include "models/sequence_model.h"

namespace attnlab::cli {

namespace {

struct BenchShape {
  const char* name;
  int64_t V, T, d, h, L, d_ff, B;
};
constexpr BenchShape kShapes[] = {
    {"S", 16, 16, 64, 4, 2, 256, 64},
    {"M", 32, 32, 128, 8, 4, 512, 64},
    {"L", 64, 64, 256, 8, 6, 1024, 32},
    {"graph", 8, 2, 4, 1, 6, 4, 1},
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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
// best kept in `peak` (timed by thread CPU time: under a load average of 13 on
// this 2-core machine wall-clock runs gave 46-73 GFLOP/s, CPU time 176).
void fma_burst(FmaPeak& peak, int threads) { peak = measure_fma_peak(threads, 10, 0.005, peak); }

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

struct BenchArgs {
  std::string config_name = "S";
  int threads = 1;
  int64_t steps = 0, warmup = 5;
  uint64_t seed = 0;
  bool no_peak = false;
  bool products = false;
  bool decode = false, no_reference = false;
  std::string arch = "decoder";
  int64_t batch = 0;
  std::string gemm;  // empty: the build's backend
};

const char* const kBenchUsage =
    "usage: attnlab bench --config S|M|L [--threads N] [--steps K]\n\n"
    "Times training steps (forward, backward, AdamW) of the encoder tagger of BENCHMARK.md on\n"
    "fixed random batches and prints one JSON line: median step_ms, tokens_per_s, params,\n"
    "achieved GFLOP/s, MFU against the fp32 FMA peak measured here with the same threads\n"
    "(and gemm_mfu against the engine's own matrix product), the CPU model, the\n"
    "matrix-product backend, and peak RSS. The products of one step are then recorded and\n"
    "replayed alone: products_ms, products_share_of_step, products_gflops, and\n"
    "products_mfu_bound, the MFU a step would reach if nothing but its products took time.\n"
    "With --decode: times greedy decoding of random prompts (KV-cached, then the uncached\n"
    "reference) and prints tokens_per_s, uncached_tokens_per_s, speedup, answers_equal.\n\n";

// The options, validated; null after --help.
const BenchShape* parse_bench(const Args& args, BenchArgs& a) {
  OptionSet opts("Options");
  opts.add("config", &a.config_name, "S | M | L (BENCHMARK.md), or graph: a width-4 model whose step is the engine's fixed cost")
      .add("threads", &a.threads, "OpenMP threads")
      .add("steps", &a.steps, "timed steps; 0 = 20 (S), 10 (M), 5 (L)")
      .add("warmup", &a.warmup, "untimed steps first")
      .add("seed", &a.seed, "seed of weights and data")
      .add("gemm", &a.gemm, "matrix-product backend for this run: eigen or onednn (default: the build's)")
      .flag("no-peak", &a.no_peak, "skip measuring the FMA and matrix-product peaks (no MFU, CPU or backend)")
      .flag("products", &a.products,
            "after the JSON line, a Markdown table of one step's matrix products by shape, each shape "
            "replayed alone: count, ms, share of the products' time, GFLOP/s")
      .flag("decode", &a.decode, "time greedy decoding (KV-cached, and uncached as the reference) instead of training")
      .add("arch", &a.arch, "with --decode: decoder | seq2seq")
      .add("batch", &a.batch, "with --decode: sequences per greedy call; 0 = the config's batch")
      .flag("no-reference", &a.no_reference, "with --decode: skip timing the uncached path");
  po::options_description all = options_with_help();
  all.add(opts.description());
  po::variables_map vm;
  const auto bare_config = [](const std::string& word) {
    for (const BenchShape& s : kShapes)
      if (word == s.name) return "--config " + word;
    return std::string();
  };
  if (!parse_command_line(args, all, vm, kBenchUsage, "", nullptr, bare_config)) return nullptr;
  const BenchShape* shape = nullptr;
  for (const BenchShape& s : kShapes)
    if (a.config_name == s.name) shape = &s;
  if (!shape) throw ValueError("--config must be S, M, L or graph, got '" + a.config_name + "'");
  if (a.threads < 1 || a.threads > 1024) throw ValueError("--threads must be in [1, 1024], got " + std::to_string(a.threads));
  if (a.steps < 0 || a.warmup < 0) throw ValueError("--steps and --warmup must be >= 0");
  if (a.decode && std::string(shape->name) == "graph") throw ValueError("--decode takes --config S, M or L, got 'graph'");
  if (!a.gemm.empty()) {
    try {
      set_gemm_backend(a.gemm);
    } catch (const ValueError& e) {
      throw ValueError(std::string("--gemm: ") + e.what());
    }
  }
  return shape;
}

// A few fixed batches: x uniform in [0, V), y = x reversed along T.
void make_batches(const BenchShape& shape, uint64_t seed, std::vector<ModelInput>& inputs,
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

struct Timings {
  std::vector<double> step_ms;  // timed steps, sorted
  double last_loss = 0;
  uint64_t nodes_per_step = 0;  // autograd nodes one step records (the same every step)
};

// Training steps (forward, backward, AdamW) of the encoder tagger of the shape.
// `between` (when set) runs untimed after a timed step once a quarter second
// has passed since it last ran, and once after the warm-up.
Timings time_steps(const BenchShape& shape, const BenchArgs& a, SequenceModel& model, int64_t steps,
                   const std::function<void()>& between) {
  OptimizerConfig oc;  // AdamW, lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0.01
  auto optimizer = make_optimizer(oc, model.named_parameters());
  std::vector<ModelInput> inputs;
  std::vector<IntTensor> targets;
  make_batches(shape, a.seed, inputs, targets);
  Timings out;
  auto last_between = Clock::now();
  for (int64_t step = 0; step < a.warmup + steps; ++step) {
    if (between && (step == a.warmup || (step > a.warmup && seconds_since(last_between) >= 0.25))) {
      between();
      last_between = Clock::now();
    }
    size_t i = static_cast<size_t>(step) % inputs.size();
    auto t = Clock::now();
    model.zero_grad();
    const uint64_t nodes_before = nodes_created();
    Var loss = cross_entropy(model.forward(inputs[i]), targets[i]);
    out.nodes_per_step = nodes_created() - nodes_before;
    backward(loss);
    optimizer->step();
    double ms = seconds_since(t) * 1e3;
    out.last_loss = loss.item();
    if (step >= a.warmup) out.step_ms.push_back(ms);
  }
  std::sort(out.step_ms.begin(), out.step_ms.end());
  return out;
}

// The products of one training step (forward and backward; the optimizer makes none).
std::vector<GemmCall> record_step_products(const BenchShape& shape, const BenchArgs& a, SequenceModel& model) {
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

// One row per distinct product shape (m x n x k, transposes, accumulate, batch
// count) of a step, in order of first appearance, its calls replayed together.
void print_products_table(const std::vector<GemmCall>& calls) {
  std::vector<std::pair<std::string, std::vector<GemmCall>>> shapes;
  for (const GemmCall& call : calls) {
    std::string key = std::to_string(call.c.rows) + " x " + std::to_string(call.c.cols) + " x " +
                      std::to_string(call.a.op_cols()) + (call.a.trans ? ", Aᵀ" : "") + (call.b.trans ? ", Bᵀ" : "") +
                      (call.accumulate ? ", +=" : "") + (call.count > 1 ? ", batch " + std::to_string(call.count) : "");
    auto it = std::find_if(shapes.begin(), shapes.end(), [&](const auto& s) { return s.first == key; });
    if (it == shapes.end()) it = shapes.insert(shapes.end(), {key, {}});
    it->second.push_back(call);
  }
  std::vector<double> ms;
  double total = 0;
  for (const auto& [key, group] : shapes) total += ms.emplace_back(replay_seconds(group, 5) * 1e3);
  std::cout << "\n| product (m x n x k) | calls | ms | share | GFLOP/s |\n|---|---|---|---|---|\n";
  char line[256];
  for (size_t i = 0; i < shapes.size(); ++i) {
    const double flops = total_flops(shapes[i].second);
    std::snprintf(line, sizeof line, "| %s | %zu | %.3f | %.1f%% | %.1f |\n", shapes[i].first.c_str(),
                  shapes[i].second.size(), ms[i], 100 * ms[i] / total, flops / ms[i] / 1e6);
    std::cout << line;
  }
  std::snprintf(line, sizeof line, "| all, each shape alone | %zu | %.3f | 100%% | |\n", calls.size(), total);
  std::cout << line;
}

// The CPU, the backend and the peaks, with MFU against each. No step can run
// faster than the FMA peak; should one seem to, every burst met load on this
// shared machine, so the peak is measured again, longer, before it is used.
void add_peaks(nlohmann::json& out, FmaPeak fma, double gflops, int threads) {
  fma_burst(fma, threads);
  for (int retry = 0; retry < 3 && gflops > fma.gflops; ++retry) fma = measure_fma_peak(threads, 40, 0.005, fma);
  const double gemm_peak = measure_gemm_peak();
  out["cpu"] = cpu_model();
  out["gemm_backend"] = gemm_backend();
  out["gemm_kernel"] = gemm_kernel();
  out["fma_peak_gflops"] = fma.gflops;
  out["fma_lanes"] = fma.lanes;
  out["fma_chains"] = fma.chains;
  out["fma_fused"] = fma.fused;
  out["mfu"] = gflops / fma.gflops;
  out["gemm_peak_gflops"] = gemm_peak;
  out["gemm_mfu"] = gflops / gemm_peak;
}

}  // namespace

int run_bench(const Args& args) {
  BenchArgs a;
  const BenchShape* shape = parse_bench(args, a);
  if (!shape) return kExitOk;
  int64_t steps = a.steps;
  if (a.decode) {
    DecodeBenchOptions d{shape->name, a.arch, shape->V, shape->T, shape->d, shape->h, shape->L, shape->d_ff,
                         a.batch > 0 ? a.batch : shape->B, steps > 0 ? steps : 3, a.threads, a.seed, !a.no_reference};
    return run_decode_bench(d);
  }
  if (steps == 0) {
    const std::string name = shape->name;
    steps = name == "S" ? 20 : name == "M" ? 10 : name == "L" ? 5 : 2000;
  }
  omp_set_num_threads(a.threads);
  TransformerConfig config;
  config.arch = Arch::encoder;
  config.vocab_size = shape->V;
  config.max_len = shape->T;
  config.d_model = shape->d;
  config.n_heads = shape->h;
  config.n_layers = shape->L;
  config.d_ff = shape->d_ff;
  auto model = make_model(config, a.seed);
  FmaPeak fma;
  std::function<void()> between;
  if (!a.no_peak) {
    fma_burst(fma, a.threads);
    between = [&] { fma_burst(fma, a.threads); };
  }
  const Timings timed = time_steps(*shape, a, *model, steps, between);
  double median = timed.step_ms[timed.step_ms.size() / 2];
  double tokens = static_cast<double>(shape->B * shape->T);
  double tokens_per_s = tokens / (median / 1e3);
  double d = static_cast<double>(shape->d);
  double fwd_flops_per_token = static_cast<double>(shape->L) * (8 * d * d + 4 * d * shape->d_ff + 4.0 * shape->T * d) +
                               2 * d * static_cast<double>(shape->V);
  double gflops = 3 * fwd_flops_per_token * tokens_per_s / 1e9;
  nlohmann::json out = {{"impl", "attnlab"},        {"config", shape->name},    {"threads", a.threads},
                        {"steps", steps},           {"step_ms", median},        {"tokens_per_s", tokens_per_s},
                        {"params", model->parameter_count()}, {"nodes_per_step", timed.nodes_per_step},
                        {"gflops", gflops},         {"final_loss", timed.last_loss}};
  out["peak_rss_mib"] = peak_rss_mib();  // training's, before the peaks' and the replay's own buffers
  std::vector<GemmCall> calls;
  if (!a.no_peak || a.products) calls = record_step_products(*shape, a, *model);
  if (!a.no_peak) {
    add_peaks(out, fma, gflops, a.threads);
    add_products_bound(out, calls, median, gflops * 1e9 * median / 1e3);
  }
  std::cout << out.dump() << std::endl;
  if (a.products) print_products_table(calls);
  return kExitOk;
}

}  // namespace attnlab::cli
