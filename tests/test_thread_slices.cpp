// Threads as data-parallel workers inside a step (training/thread_slices.h):
// each micro-batch computed once, on its own thread's model with the model's
// values, handed out in order; and at the command line, N threads give the
// bits of --grad-accum N on one thread.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "framework/error.h"
#include "framework/ops/loss.h"
#include "tests/cli_harness.h"
#include "tests/fixtures.h"
#include "training/thread_slices.h"

using namespace attnlab;
namespace fs = std::filesystem;
using attnlab::testing::checkpoint_difference;
using attnlab::testing::checkpoint_stem;
using attnlab::testing::require_same_run;
using attnlab::testing::CliResult;
using attnlab::testing::model_config;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;

namespace {

std::unique_ptr<SequenceModel> tiny_model() { return make_model(model_config("encoder", 7, 6, 8, 2, 1, 16), 5); }

}  // namespace

TEST_CASE("thread slices compute each micro-batch once, a block of T at a time on T distinct models holding the "
          "model's values and mode, one thread each, and hand them out in order",
          "[thread-slices]") {
  auto model = tiny_model();
  model->eval();
  Var first = model->parameters()[0];
  first.value()[0] = Real(0.625);  // a value the replicas' own initialisation does not have
  ThreadSlices slices(*model, 3);
  REQUIRE(slices.threads() == 3);
  const int caller_threads = omp_get_max_threads();
  std::vector<int> computed(7, 0);
  std::vector<const SequenceModel*> model_of(7, nullptr);
  std::vector<int> inner_threads(7, 0);
  auto next = slices.ordered_leaves(2, 9, [&](SequenceModel& on, int64_t k) {
    const size_t i = static_cast<size_t>(k - 2);
    ++computed[i];
    model_of[i] = &on;
    inner_threads[i] = omp_get_max_threads();
    CHECK(on.parameters()[0].value()[0] == Real(0.625));
    CHECK_FALSE(on.training());
    return std::vector<Real>{static_cast<Real>(k), static_cast<Real>(10 * k)};
  });
  for (int64_t k = 2; k < 9; ++k) CHECK(next(k) == std::vector<Real>{static_cast<Real>(k), static_cast<Real>(10 * k)});
  CHECK(computed == std::vector<int>(7, 1));
  CHECK(inner_threads == std::vector<int>(7, 1));
  CHECK(omp_get_max_threads() == caller_threads);
  // Blocks [2, 5), [5, 8), [8, 9): three models in each full block, the model itself first.
  for (size_t block : {0, 3}) {
    CHECK(model_of[block] == model.get());
    CHECK(std::set<const SequenceModel*>(model_of.begin() + block, model_of.begin() + block + 3).size() == 3);
  }
  CHECK(model_of[6] == model.get());
}

TEST_CASE("thread slices pass a micro-batch's exception to the caller, one thread runs every leaf on the model, and "
          "sum_in_place takes 1 to T micro-batches, one on the calling thread",
          "[thread-slices]") {
  auto model = tiny_model();
  ThreadSlices two(*model, 2);
  auto next = two.ordered_leaves(0, 4, [](SequenceModel&, int64_t k) -> std::vector<Real> {
    if (k == 3) throw ShapeError("micro-batch 3 failed");
    return {static_cast<Real>(k)};
  });
  CHECK(next(0) == std::vector<Real>{0});
  CHECK(next(1) == std::vector<Real>{1});
  CHECK_THROWS_WITH(next(2), "micro-batch 3 failed");

  ThreadSlices one(*model, 1);
  std::vector<const SequenceModel*> used;
  auto serial = one.ordered_leaves(0, 3, [&](SequenceModel& on, int64_t k) {
    used.push_back(&on);
    return std::vector<Real>{static_cast<Real>(k)};
  });
  for (int64_t k = 0; k < 3; ++k) CHECK(serial(k) == std::vector<Real>{static_cast<Real>(k)});
  CHECK(used == std::vector<const SequenceModel*>(3, model.get()));
  CHECK_THROWS_AS(ThreadSlices(*model, 0), ValueError);

  // sum_in_place takes 1 to threads() micro-batches; one is the model's own gradient, untouched,
  // computed on the calling thread with its thread count (a step of one micro-batch splits every op).
  ModelInput in;
  in.src = IntTensor({2, 6}, 3);
  const IntTensor targets({2, 6}, 4);
  std::vector<Real> computed;
  int runs = 0;
  const int caller_threads = omp_get_max_threads();
  omp_set_num_threads(3);
  two.sum_in_place(1, [&](SequenceModel& on, int64_t k) {
    ++runs;
    CHECK(&on == model.get());
    CHECK(k == 0);
    CHECK(omp_get_max_threads() == 3);
    CHECK_FALSE(omp_in_parallel());
    on.zero_grad();
    backward(cross_entropy(on.forward(in), targets));
    computed.assign(on.parameters()[0].grad().data(), on.parameters()[0].grad().data() + on.parameters()[0].numel());
  });
  omp_set_num_threads(caller_threads);
  CHECK(runs == 1);
  const Var first = model->parameters()[0];
  CHECK(std::vector<Real>(first.grad().data(), first.grad().data() + first.numel()) == computed);
  const auto nothing = [](SequenceModel&, int64_t) {};
  CHECK_THROWS_AS(two.sum_in_place(0, nothing), ValueError);
  CHECK_THROWS_AS(two.sum_in_place(3, nothing), ValueError);
}

TEST_CASE("sum_in_place sums every element of a gradient cut into pieces with a short last one, and a gradient that "
          "only a replica has",
          "[thread-slices]") {
  // d 8, d_ff 2100: the first feed-forward weight has 16,800 elements, summed as
  // pieces of 16,384 and 416 (under AddressSanitizer, a piece read or written
  // past a gradient's end is reported).
  auto model = make_model(model_config("encoder", 7, 6, 8, 2, 1, 2100), 5);
  const std::vector<Var> own = model->parameters();
  int64_t largest = 0;
  for (const Var& p : own) largest = std::max(largest, p.numel());
  REQUIRE(largest == 16800);
  ThreadSlices slices(*model, 2);
  // Micro-batch k's gradient of parameter i, element e: exact in floats, and so is the sum of two.
  const auto value = [](int64_t k, size_t i, int64_t e) { return Real(k + 1) + Real(i % 5) + Real(e % 7) / 8; };
  slices.sum_in_place(2, [&](SequenceModel& on, int64_t k) {
    std::vector<Var> params = on.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (k == 0 && i == 0) continue;  // the model itself: no gradient for its first parameter
      params[i].grad() = Tensor::uninitialized(params[i].shape());
      for (int64_t e = 0; e < params[i].numel(); ++e) params[i].grad()[e] = value(k, i, e);
    }
  });
  int64_t wrong = 0;
  for (size_t i = 0; i < own.size(); ++i) {
    REQUIRE(own[i].has_grad());
    for (int64_t e = 0; e < own[i].numel(); ++e)
      wrong += own[i].grad()[e] != (i == 0 ? value(1, i, e) : value(0, i, e) + value(1, i, e));
  }
  CHECK(wrong == 0);
}

TEST_CASE("sum_in_place sums a gradient that the last replica lacks and one that only the model itself has, and "
          "leaves a parameter without gradient on every model without one", "[thread-slices]") {
  auto model = tiny_model();
  const std::vector<Var> own = model->parameters();
  REQUIRE(own.size() >= 3);
  ThreadSlices slices(*model, 3);
  const auto value = [](int64_t k, size_t i, int64_t e) { return Real(k + 1) * 4 + Real(i % 3) + Real(e % 5) / 8; };
  // Parameter 0: models 0 and 1 only (the last replica lacks it); 1: model 0 only; 2: nobody.
  const auto has = [](int64_t k, size_t i) { return i == 0 ? k < 2 : i == 1 ? k == 0 : i != 2; };
  slices.sum_in_place(3, [&](SequenceModel& on, int64_t k) {
    std::vector<Var> params = on.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (!has(k, i)) continue;
      params[i].grad() = Tensor::uninitialized(params[i].shape());
      for (int64_t e = 0; e < params[i].numel(); ++e) params[i].grad()[e] = value(k, i, e);
    }
  });
  CHECK_FALSE(own[2].has_grad());
  int64_t wrong = 0;
  for (size_t i = 0; i < own.size(); ++i) {
    if (i == 2) continue;
    REQUIRE(own[i].has_grad());
    for (int64_t e = 0; e < own[i].numel(); ++e) {
      Real sum = 0;
      for (int64_t k = 0; k < 3; ++k) sum += has(k, i) ? value(k, i, e) : Real(0);
      wrong += own[i].grad()[e] != sum;
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("train --threads N gives the bits of --threads 1 --grad-accum N (and of K times N with --grad-accum K), "
          "not those of one micro-batch, and a batch N does not split, or a probed run, trains with its ops split, reproducibly",
          "[thread-slices][cli]") {
  TempDir dir("thread-slices");
  const std::string flags =
      "train --task reverse --vocab 5 --min-len 4 --max-len 6 --d-model 16 --heads 2 --layers 1 --d-ff 32"
      " --heldout 30 --target 0 --log-every 5 --eval-every 10 --dropout 0.1 --batch-size 12 --steps 20 --quiet";
  const auto train = [&](const std::string& name, const std::string& extra) {
    const CliResult r = run_attnlab(flags + extra + " --run " + (dir / name));
    INFO(r.out);
    REQUIRE(r.code == 0);
    return dir / name;
  };
  require_same_run(train("t2", " --threads 2"), train("a2", " --threads 1 --grad-accum 2"), 20);
  require_same_run(train("t3", " --threads 3"), train("a3", " --threads 1 --grad-accum 3"), 20);
  require_same_run(train("t2a2", " --threads 2 --grad-accum 2"), train("a4", " --threads 1 --grad-accum 4"), 20);
  const std::string one = train("t1", " --threads 1");
  CHECK(checkpoint_difference(checkpoint_stem(one, 20) + ".safetensors", checkpoint_stem(dir / "t2", 20) + ".safetensors") != "");
  // 12 sequences do not split into 5 threads: every op is split instead, and the run is still reproducible.
  require_same_run(train("t5", " --threads 5"), train("t5again", " --threads 5"), 20);
  // The probes observe one model: a probed run's threads split its ops, and it trains.
  train("probed", " --threads 2 --probe-every 5");
  CHECK(fs::exists(dir / "probed/probe_params.csv"));
}

TEST_CASE("bench --threads 2 runs whole slices of the batch on each thread unless --thread-split ops, with the same "
          "first loss either way, and another value is refused with one line naming it",
          "[thread-slices][cli][bench]") {
  const auto first_step = [](const std::string& extra, int threads = 2) {
    const CliResult r = run_attnlab("bench --config S --threads " + std::to_string(threads) +
                                    " --steps 1 --warmup 0 --no-peak" + extra);
    INFO(r.out);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  };
  const nlohmann::json batch = first_step(""), ops = first_step(" --thread-split ops");
  CHECK(batch["threads_split"] == "batch");
  CHECK(ops["threads_split"] == "ops");
  CHECK(first_step("", 1)["threads_split"] == "none");
  CHECK(batch["final_loss"].get<double>() == Approx(ops["final_loss"].get<double>()).epsilon(1e-5));
  CHECK(batch["nodes_per_step"].get<int64_t>() == 2 * ops["nodes_per_step"].get<int64_t>());  // one graph per slice
  const CliResult bad = run_attnlab("bench --config S --threads 2 --thread-split rows --no-peak");
  CHECK(bad.code == 2);
  CHECK(bad.out == "attnlab bench: --thread-split must be one of batch, ops, got 'rows'\n");
}
