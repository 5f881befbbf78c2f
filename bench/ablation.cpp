#include "bench/ablation.h"

#include <omp.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/cpu_info.h"
#include "bench/timing.h"
#include "framework/error.h"
#include "framework/ops/gemm.h"
#include "framework/random.h"
#include "interventions/ablation.h"

namespace attnlab::bench {

namespace {

// Random inputs of T symbols, each answered by itself reversed.
std::vector<Example> random_examples(const Shape& shape, int64_t n, uint64_t seed) {
  Rng rng(seed + 1);
  std::vector<Example> out(static_cast<size_t>(n));
  for (Example& e : out) {
    for (int64_t t = 0; t < shape.T; ++t) e.input.push_back(static_cast<int32_t>(rng.integer(SpecialTokens::count, shape.V - 1)));
    e.output.assign(e.input.rbegin(), e.input.rend());
  }
  return out;
}

}  // namespace

void run_ablation_bench(const AblationBenchOptions& o) {
  if (o.examples < 1 || o.examples > 100000)
    throw ValueError("--examples must be in [1, 100000], got " + std::to_string(o.examples));
  omp_set_num_threads(o.threads);
  const TransformerConfig config = encoder_config(o.shape);
  auto model = make_model(config, o.seed);
  const TeacherForcedSet set = teacher_forced_set(config, false, random_examples(o.shape, o.examples, o.seed), 64);
  std::vector<Component> heads;
  for (const Component& k : model_components(config))
    if (k.kind == ComponentKind::head) heads.push_back(k);
  score_set(*model, set);  // warm-up: the allocator's pools, the kernels' first calls
  double ablation_s = 0, plain_s = 0;
  bool same_intact = true;
  for (size_t k = 0; k < heads.size(); ++k) {
    const auto plain = [&] {
      const Clock::time_point t0 = Clock::now();
      const SetScore a = score_set(*model, set), b = score_set(*model, set);
      plain_s += seconds_since(t0);
      return a.loss == b.loss ? a : SetScore{};
    };
    const auto ablated = [&] {
      const Clock::time_point t0 = Clock::now();
      const AblationResult r = ablate(*model, set, {heads[k]}, AblationMode::zero, 0);
      ablation_s += seconds_since(t0);
      return r.intact;
    };
    // ABBA: the plain passes first on even heads, second on odd ones.
    SetScore p, a;
    if (k % 2 == 0) p = plain(), a = ablated();
    else a = ablated(), p = plain();
    same_intact = same_intact && p.loss == a.loss;
  }
  // Per head: the intact pass and the head's (2 passes) against 2 plain passes; the whole
  // ablation is L·H head passes and one intact pass against L·H + 1 plain passes.
  const double per_pass_ablation = ablation_s / (2.0 * static_cast<double>(heads.size()));
  const double per_pass_plain = plain_s / (2.0 * static_cast<double>(heads.size()));
  nlohmann::json out = cpu_json();
  out.update({{"impl", "attnlab"}, {"mode", "ablation"}, {"config", o.shape.name}, {"threads", o.threads},
              {"examples", o.examples}, {"heads", heads.size()}, {"passes", heads.size() + 1},
              {"ablation_s", per_pass_ablation * static_cast<double>(heads.size() + 1)},
              {"plain_s", per_pass_plain * static_cast<double>(heads.size() + 1)},
              {"ratio", per_pass_ablation / per_pass_plain}, {"intact_equals_plain", same_intact},
              {"gemm_kernel", gemm_kernel()}, {"peak_rss_mib", peak_rss_mib()}});
  std::cout << out.dump() << std::endl;
}

}  // namespace attnlab::bench
