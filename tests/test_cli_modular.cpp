// --task modular through the attnlab executable: a short full-batch run, what
// it prints and records, and its refusals (one line, exit 2, no run directory).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/child_process.h"
#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::slurp;
using attnlab::testing::TempDir;

namespace {

const std::string kModel =
    " --task modular --model decoder --d-model 16 --heads 2 --layers 1 --d-ff 32 --threads 1 --target 0 --eval-every 2"
    " --log-every 1";
const std::string kTiny = kModel + " --modulus 7";

}  // namespace

TEST_CASE("attnlab train --task modular --modulus 7 runs full-batch steps, records the task and resumes bitwise", "[cli][modular]") {
  TempDir dir("cli-modular-run");
  const auto r = run_attnlab("train" + kTiny + " --operation sub --batch-size 15 --steps 4 --run " + dir / "run");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("task: modular: sub, input 'a - b =' for a, b in 0..6, output the residue mod 7; training set 15 of "
                   "the 49 pairs (--train-fraction 0.3, seed 0), held out the other 34, V = 13\n") != std::string::npos);
  CHECK(r.out.find("data: a fixed set of 15 training examples, the whole set in one order every step (full batch)\n") !=
        std::string::npos);
  const std::string config = slurp(dir / "run/config.ini");
  CHECK(config.find("\noperation = sub\n") != std::string::npos);
  CHECK(config.find("\nmodulus = 7\n") != std::string::npos);
  CHECK(config.find("\ntrain-fraction = 0.3\n") != std::string::npos);
  CHECK(fs::exists(dir / "run/metrics.csv"));
  // Minibatches of 5 reshuffled every epoch, stopped at step 2 and resumed: bitwise the run that never stopped.
  const std::string mini = kTiny + " --operation sub --batch-size 5 --quiet";
  REQUIRE(run_attnlab("train" + mini + " --steps 4 --run " + dir / "whole").code == 0);
  REQUIRE(run_attnlab("train" + mini + " --steps 2 --run " + dir / "split").code == 0);
  REQUIRE(run_attnlab("train --quiet --resume " + dir / "split" + " --steps 4").code == 0);
  attnlab::testing::require_same_run(dir / "whole", dir / "split", 4);
  const auto eval = run_attnlab("eval --run " + dir / "run" + " --json");
  REQUIRE(eval.code == 0);
  CHECK(eval.out.find("\"examples_evaluated\":34") != std::string::npos);  // every held-out pair
  const auto len = run_attnlab("eval --run " + dir / "run" + " --len 5");
  CHECK(len.code == 2);
  CHECK(len.out == "attnlab eval: --len needs a generated task; task 'modular' has a fixed set of inputs\n");
}

TEST_CASE("attnlab train --task modular refuses bad values in one line, exit 2, writing nothing", "[cli][modular]") {
  TempDir dir("cli-modular-refusals");
  const std::string run = " --run " + dir / "never";
  const std::pair<std::string, std::string> cases[] = {
      {"--modulus 1", "--modulus 1 is invalid; expected 2..1000"},
      {"--operation div --modulus 12",
       "--operation div needs a prime --modulus (every b != 0 invertible), got 12, divisible by 2"},
      {"--operation pow", "--operation must be one of add, div, mul, sq, sub, got 'pow'"},
      {"--train-fraction 1", "--train-fraction 1 is invalid; expected 0 < f < 1"},
      {"--train-fraction 0.01", "--train-fraction 0.01 of the 49 pairs of --modulus 7 is 0 training pairs; raise "
                                "--train-fraction"},
      {"--batch-size 16", "--batch-size 16 is larger than the 15 training pairs of task 'modular' (--train-fraction "
                          "0.3); use at most 15 (that: the whole set every step)"},
      {"--batch-size 15 --train-size 15", "--train-size 15 does not apply to task 'modular': its training set is "
                                          "--train-fraction 0.3 of all pairs (15 pairs); set --train-fraction instead"},
      {"--batch-size 15 --heldout 30", "--heldout 30 does not apply to task 'modular': it holds out every pair not in "
                                       "its training set (34 pairs); leave --heldout out"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args);
    const auto r = run_attnlab("train" + (args.find("--modulus") == std::string::npos ? kTiny : kModel) + " " + args + run);
    CHECK(r.code == 2);
    CHECK(r.out == "attnlab train: " + message + "\n");
    CHECK_FALSE(fs::exists(dir / "never"));
  }
}
