#include "bench/ablation.h"

#include <omp.h>

#include <chrono>
#include <functional>
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

// The six orders of the three timed steps (plain, recomputing, reusing), one per head in
// turn, so that each step runs first, second and last equally often.
const int kOrders[6][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}, {1, 0, 2}};

// The seconds of ablations' intact passes and of their head passes, told apart by the
// time of the intact pass's last batch (the logits sink).
struct Timed {
  double intact_s = 0, heads_s = 0;
  // Every head's pass and one intact pass, from `heads` single-head ablations.
  double whole(double heads) const { return heads_s + intact_s / heads; }
};

AblationResult timed_ablation(SequenceModel& model, const TeacherForcedSet& set, const Component& head, bool reuse,
                              Timed& timed) {
  const Clock::time_point t0 = Clock::now();
  Clock::time_point intact_end = t0;
  const AblationLogits sink = [&](int64_t row, size_t, const Tensor&) {
    if (row < 0) intact_end = Clock::now();
  };
  AblationResult r = ablate(model, set, {head}, AblationMode::zero, 0, sink, reuse);
  const double total = seconds_since(t0), intact = std::chrono::duration<double>(intact_end - t0).count();
  timed.intact_s += intact;
  timed.heads_s += total - intact;
  return r;
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
  double plain_s = 0;
  Timed full, reused;
  bool same_intact = true, same_rows = true;
  for (size_t k = 0; k < heads.size(); ++k) {
    const auto plain = [&] {
      const Clock::time_point t0 = Clock::now();
      const SetScore a = score_set(*model, set), b = score_set(*model, set);
      plain_s += seconds_since(t0);
      same_intact = same_intact && a.loss == b.loss;
    };
    AblationResult a, b;
    const std::function<void()> steps[3] = {plain, [&] { a = timed_ablation(*model, set, heads[k], false, full); },
                                            [&] { b = timed_ablation(*model, set, heads[k], true, reused); }};
    for (int i : kOrders[k % 6]) steps[i]();
    same_intact = same_intact && a.intact.loss == b.intact.loss && a.intact.loss == score_set(*model, set).loss;
    same_rows = same_rows && a.rows[0].score.loss == b.rows[0].score.loss;
  }
  nlohmann::json out = cpu_json();
  const double n = static_cast<double>(heads.size());
  out.update({{"impl", "attnlab"}, {"mode", "ablation"}, {"config", o.shape.name}, {"threads", o.threads},
              {"examples", o.examples}, {"heads", heads.size()}, {"passes", heads.size() + 1},
              {"ablation_s", reused.whole(n)}, {"ablation_recompute_s", full.whole(n)},
              {"plain_s", plain_s / (2 * n) * (n + 1)}, {"ratio", reused.whole(n) / (plain_s / (2 * n) * (n + 1))},
              {"ratio_recompute", full.whole(n) / (plain_s / (2 * n) * (n + 1))},
              {"intact_equals_plain", same_intact}, {"reuse_equals_recompute", same_rows},
              {"gemm_kernel", gemm_kernel()}, {"peak_rss_mib", peak_rss_mib()}});
  std::cout << out.dump() << std::endl;
}

}  // namespace attnlab::bench
