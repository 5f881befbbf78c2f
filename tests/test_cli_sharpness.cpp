// train --probe-sharpness through the attnlab executable: the CSV's rows at
// the probed steps, the thresholds at each step's learning rate, weights
// bitwise those of an unprobed run, a resumed run's rows, the refusals.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <string>

#include "framework/io/csv.h"
#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;

namespace {

const char* kSmall = " --vocab 6 --min-len 5 --max-len 5 --d-model 16 --heads 2 --layers 2 --d-ff 32 --batch-size 8"
                     " --heldout 50 --quiet --threads 1 --target 0";

attnlab::CsvTable sharpness_csv(const std::string& run) { return attnlab::read_csv(run + "/probe_sharpness.csv", 1 << 20); }

std::string field(const attnlab::CsvTable& t, size_t row, const std::string& column) {
  const auto at = std::find(t.columns.begin(), t.columns.end(), column);
  REQUIRE(at != t.columns.end());
  return t.rows[row][static_cast<size_t>(at - t.columns.begin())];
}

}  // namespace

TEST_CASE("train --probe-sharpness N writes lambda_max at step 1 and every N-th step, with adamw also P^-1 H",
          "[cli][sharpness]") {
  TempDir dir("sharpness_every");
  Result r = run_attnlab(std::string("train --task copy") + kSmall +
                         " --steps 10 --eval-every 10 --lr 0.002 --probe-sharpness 5 --run " + (dir / "run"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const attnlab::CsvTable t = sharpness_csv(dir / "run");
  REQUIRE(t.rows.size() == 6);  // steps 1, 5, 10 x hessian, preconditioned
  std::set<std::string> steps;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    steps.insert(field(t, i, "step"));
    const bool pre = i % 2 == 1;
    CHECK(field(t, i, "operator") == (pre ? "preconditioned" : "hessian"));
    CHECK(std::stod(field(t, i, "lambda_max")) > 0);
    CHECK(std::stod(field(t, i, "residual")) <= 1e-3 * std::stod(field(t, i, "lambda_max")) * (1 + 1e-12));
    CHECK(field(t, i, "converged") == "1");
    CHECK(field(t, i, "lr") == "0.002");
    if (pre) CHECK(std::stod(field(t, i, "threshold")) == Approx(19000));  // 38 / 0.002
    else CHECK(field(t, i, "threshold").empty());                      // none for H under adamw
  }
  CHECK(steps == std::set<std::string>{"1", "5", "10"});
}

TEST_CASE("train --probe-sharpness with sgd: one row per probe, 2/lr at the scheduled learning rate",
          "[cli][sharpness]") {
  TempDir dir("sharpness_sgd");
  Result r = run_attnlab(std::string("train --task copy") + kSmall +
                         " --optimizer sgd --lr 0.5 --weight-decay 0 --schedule linear --min-lr 0.1 --steps 4"
                         " --eval-every 4 --probe-sharpness 2 --run " + (dir / "run"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const attnlab::CsvTable t = sharpness_csv(dir / "run");
  REQUIRE(t.rows.size() == 3);  // steps 1, 2, 4
  for (size_t i = 0; i < t.rows.size(); ++i) {
    CHECK(field(t, i, "operator") == "hessian");
    CHECK(std::stod(field(t, i, "threshold")) == Approx(2 / std::stod(field(t, i, "lr"))));
  }
  CHECK(field(t, 2, "step") == "4");
  CHECK(std::stod(field(t, 2, "lr")) < std::stod(field(t, 0, "lr")));  // the schedule's own rate each step
}

TEST_CASE("the sharpness and induction probes change nothing: a run probed every step ends with bitwise the same weights",
          "[cli][sharpness]") {
  TempDir dir("sharpness_bitwise");
  // Dropout on (the probe turns it off and must not draw from its stream), decoder (masks), gradient probes too.
  const std::string common = std::string("train --task reverse --model decoder") + kSmall +
                             " --dropout 0.1 --steps 6 --eval-every 6 --run ";
  Result plain = run_attnlab(common + (dir / "plain"));
  INFO(plain.out);
  REQUIRE(plain.code == 0);
  Result probed = run_attnlab(common + (dir / "probed") + " --probe-sharpness 1 --probe-every 2 --probe-induction 1");
  INFO(probed.out);
  REQUIRE(probed.code == 0);
  CHECK(attnlab::testing::checkpoint_difference(dir / "plain/checkpoints/step-00000006.safetensors",
                                                dir / "probed/checkpoints/step-00000006.safetensors") == "");
  CHECK(attnlab::testing::metrics_without_times(dir / "plain/metrics.csv") ==
        attnlab::testing::metrics_without_times(dir / "probed/metrics.csv"));
  CHECK(sharpness_csv(dir / "probed").rows.size() == 12);
  CHECK(attnlab::read_csv(dir / "probed/probe_induction.csv", 1 << 20).rows.size() == 6 * 2 * 2);  // steps x layers x heads
  CHECK_FALSE(fs::exists(dir / "plain/probe_sharpness.csv"));
  CHECK_FALSE(fs::exists(dir / "plain/probe_induction.csv"));
}

TEST_CASE("a resumed run keeps the sharpness rows up to its checkpoint and probes the same batch after it",
          "[cli][sharpness]") {
  TempDir dir("sharpness_resume");
  const std::string common = std::string("train --task copy") + kSmall + " --eval-every 3 --probe-sharpness 2";
  Result whole = run_attnlab(common + " --steps 6 --run " + (dir / "whole"));
  REQUIRE(whole.code == 0);
  Result first = run_attnlab(common + " --steps 3 --run " + (dir / "split"));
  REQUIRE(first.code == 0);
  Result rest = run_attnlab("train --resume " + (dir / "split") + " --steps 6 --quiet");
  INFO(rest.out);
  REQUIRE(rest.code == 0);
  const attnlab::CsvTable a = sharpness_csv(dir / "whole"), b = sharpness_csv(dir / "split");
  REQUIRE(a.rows.size() == b.rows.size());  // steps 1, 2, 4, 6, two operators each
  for (size_t i = 0; i < a.rows.size(); ++i) {
    CHECK(field(a, i, "step") == field(b, i, "step"));
    CHECK(field(a, i, "loss") == field(b, i, "loss"));  // the same probe batch and weights
    // λ_max to the tolerance (the resumed run's first probe starts cold, not from the lost vector).
    CHECK(std::stod(field(a, i, "lambda_max")) ==
          Approx(std::stod(field(b, i, "lambda_max"))).epsilon(3e-3));
  }
}

TEST_CASE("train refuses bad --probe-sharpness settings before training, one line, exit 2", "[cli][sharpness]") {
  TempDir dir("sharpness_refusals");
  const std::string base = std::string("train --task copy") + kSmall + " --steps 2 --run " + (dir / "run");
  const std::pair<const char*, const char*> cases[] = {
      {" --probe-sharpness -1", "--probe-sharpness must be >= 0, got -1"},
      {" --probe-sharpness 1 --sharpness-tol 0", "--sharpness-tol must be in (0, 1), got 0"},
      {" --probe-sharpness 1 --sharpness-tol 1", "--sharpness-tol must be in (0, 1), got 1"},
      {" --probe-sharpness 1 --sharpness-iters 0", "--sharpness-iters must be >= 1, got 0"},
      {" --sharpness-tol 0.01", "--sharpness-tol and --sharpness-iters apply to --probe-sharpness N, which is 0 (off)"},
      {" --sharpness-iters 5", "--sharpness-tol and --sharpness-iters apply to --probe-sharpness N, which is 0 (off)"},
  };
  for (const auto& [flags, message] : cases) {
    Result r = run_attnlab(base + flags);
    INFO(flags << ": " << r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find(message) != std::string::npos);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "run"));
  }
}
