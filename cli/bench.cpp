// attnlab bench: the command line of the benchmarks in bench/ (the workload
// is docs/benchmark.md's). Training steps by default (bench/training.h),
// greedy decoding with --decode (bench/decoding.h).
#include "bench/ablation.h"
#include "bench/decoding.h"
#include "bench/training.h"
#include "cli/comm_bench.h"
#include "cli/command_line.h"
#include "cli/option_set.h"
#include "framework/ops/gemm.h"
#include "training/distributed/launch.h"

namespace attnlab::cli {

namespace {

// How several threads share a training step (bench/training.h's batch_slices).
enum class ThreadSplit { batch, ops };
const ChoiceNames<ThreadSplit>& choice_names(ThreadSplit) {
  static const ChoiceNames<ThreadSplit> names = {
      {ThreadSplit::batch, "batch",
       "each runs whole slices of the batch, as train does, where the batch splits evenly among them"},
      {ThreadSplit::ops, "ops", "every op is split among them"}};
  return names;
}

struct BenchArgs {
  std::string config_name = "S";
  int threads = 1;
  int64_t steps = 0, warmup = 5;
  uint64_t seed = 0;
  bool no_peak = false;
  bool products = false;
  bool decode = false, no_reference = false;
  bool comm = false;
  bool ablation = false;
  int64_t examples = 500;
  Arch arch = Arch::decoder;
  int64_t batch = 0;
  std::string gemm;  // empty: the build's backend
  ThreadSplit thread_split = ThreadSplit::batch;
  Precision precision = Precision::fp32;
};

const char* const kBenchUsage =
    "usage: attnlab bench --config S|M|L [--threads N] [--steps K]\n\n"
    "Times training steps (forward, backward, AdamW) of the encoder tagger of docs/benchmark.md on\n"
    "fixed random batches and prints one JSON line. Every line names the CPU (cpu, cpu_vendor,\n"
    "cpu_family, cpu_model_number, cpu_isa), the products' precision and gemm_kernel. Training\n"
    "(threads_split: batch, ops or none, as --thread-split and the thread count decide)\n"
    "adds median step_ms, tokens_per_s, params, achieved GFLOP/s, peak RSS, and MFU against the\n"
    "fp32 FMA peak measured here with the same threads (gemm_mfu against the engine's own\n"
    "matrix product; where the CPU has AVX512_BF16, bf16_dot_peak_gflops, and with --precision\n"
    "bf16 mfu_bf16 against it). The products of one step are then recorded and\n"
    "replayed alone: products_ms, products_share_of_step, products_gflops, and\n"
    "products_mfu_bound, the MFU a step would reach if nothing but its products took time.\n"
    "With --ablation: times zeroing every head in turn over --examples random examples against as many\n"
    "plain evaluations (L*H + 1), interleaved, each head's pass from its block on (ablation_s) and\n"
    "recomputing the blocks before it (ablation_recompute_s), and prints them, plain_s and the ratios.\n"
    "With --decode: times greedy decoding of random prompts (KV-cached, then the uncached\n"
    "reference) and prints tokens_per_s, uncached_tokens_per_s, speedup, answers_equal.\n"
    "Under mpirun -np N, with --comm: times the collectives of data-parallel training between the\n"
    "N processes and prints their latency alpha_s and inverse bandwidth beta_s_per_byte.\n\n";

// The options, validated; null after --help.
const bench::Shape* parse_bench(const Args& args, BenchArgs& a) {
  OptionSet opts("Options");
  opts.add("config", &a.config_name, "S | M | L (docs/benchmark.md), or graph: a width-4 model whose step is the engine's fixed cost")
      .add("threads", &a.threads, "OpenMP threads")
      .add("thread-split", &a.thread_split,
           "how several threads share a step: {}")
      .add("steps", &a.steps, "timed steps; 0 = 200 (S), 20 (M), 5 (L)")
      .add("warmup", &a.warmup, "untimed steps first")
      .add("seed", &a.seed, "seed of weights and data")
      .add("gemm", &a.gemm, "matrix-product backend for this run: eigen or onednn (default: the build's)")
      .add("precision", &a.precision,
           "of the matrix products (as train --precision): {}")
      .flag("no-peak", &a.no_peak, "skip measuring the FMA, bf16 and matrix-product peaks (no MFU)")
      .flag("products", &a.products,
            "after the JSON line, a Markdown table of one step's matrix products by shape, each shape "
            "replayed alone: count, ms, share of the products' time, GFLOP/s")
      .flag("decode", &a.decode, "time greedy decoding (KV-cached, and uncached as the reference) instead of training")
      .add("arch", &a.arch, "with --decode: decoder | seq2seq")
      .add("batch", &a.batch, "with --decode: sequences per greedy call; 0 = the config's batch")
      .flag("no-reference", &a.no_reference, "with --decode: skip timing the uncached path")
      .flag("ablation", &a.ablation, "time ablating every head (attnlab ablate) against L*H + 1 plain evaluations")
      .add("examples", &a.examples, "with --ablation: examples in the set")
      .flag("comm", &a.comm, "under mpirun: time the collectives between the processes (--steps: repetitions)");
  po::options_description all = options_with_help();
  all.add(opts.description());
  po::variables_map vm;
  const auto bare_config = [](const std::string& word) {
    return bench::find_shape(word) ? "--config " + word : std::string();
  };
  if (!parse_command_line(args, all, vm, kBenchUsage, "", nullptr, bare_config)) return nullptr;
  const bench::Shape* shape = bench::find_shape(a.config_name);
  if (!shape) throw ValueError("--config must be S, M, L or graph, got '" + a.config_name + "'");
  if (a.threads < 1 || a.threads > 1024) throw ValueError("--threads must be in [1, 1024], got " + std::to_string(a.threads));
  if (a.steps < 0 || a.warmup < 0) throw ValueError("--steps and --warmup must be >= 0");
  if (a.decode && std::string(shape->name) == "graph") throw ValueError("--decode takes --config S, M or L, got 'graph'");
  if (a.comm && launched_size() <= 1)
    throw ValueError("--comm times the collectives between processes: run it as mpirun -np N attnlab bench --comm");
  if (!a.comm && launched_size() > 1)
    throw ValueError("under mpirun attnlab bench measures the collectives, with --comm (scripts/studies/distributed_bench.py "
                     "times data-parallel training steps)");
  if (!a.gemm.empty()) {
    try {
      set_gemm_backend(a.gemm);
    } catch (const ValueError& e) {
      throw ValueError(std::string("--gemm: ") + e.what());
    }
  }
  check_gemm_precision(a.precision, "--precision");
  set_gemm_precision(a.precision);
  return shape;
}

}  // namespace

int run_bench(const Args& args) {
  BenchArgs a;
  const bench::Shape* shape = parse_bench(args, a);
  if (!shape) return kExitOk;
  if (a.comm) {
    const std::unique_ptr<Communicator> comm = start_communicator();
    run_comm_bench(*comm, a.steps > 0 ? a.steps : 20);
    return kExitOk;
  }
  if (a.ablation) {
    bench::run_ablation_bench({*shape, a.examples, a.threads, a.seed});
    return kExitOk;
  }
  if (a.decode) {
    const bench::DecodeOptions d{*shape, a.arch, a.batch > 0 ? a.batch : shape->B, a.steps > 0 ? a.steps : 3,
                                 a.threads, a.seed, !a.no_reference};
    return bench::run_decoding(d) ? kExitOk : kExitFailure;
  }
  bench::run_training(*shape, {a.threads, a.steps, a.warmup, a.seed, !a.no_peak, a.products, a.thread_split == ThreadSplit::batch});
  return kExitOk;
}

}  // namespace attnlab::cli
