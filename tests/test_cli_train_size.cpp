// --train-size through the attnlab executable: each refusal's one line, exit 2
// and no run directory; what a run with a fixed set records and prints; and a
// full-batch run resumed with --resume is bitwise the uninterrupted one.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "framework/io/checkpoint.h"
#include "tests/child_process.h"
#include "tests/cli_harness.h"
#include "tests/tiny_training.h"
#include "training/train_state.h"

namespace fs = std::filesystem;
using attnlab::testing::require_same_run;
using attnlab::testing::run_attnlab;
using attnlab::testing::slurp;
using attnlab::testing::TempDir;

namespace {

const std::string kTiny =
    " --task reverse --vocab 4 --min-len 4 --max-len 4 --d-model 16 --heads 2 --layers 1 --d-ff 32"
    " --heldout 20 --threads 1 --target 0 --eval-every 4 --log-every 2";

}  // namespace

TEST_CASE("attnlab train refuses a --train-size it cannot hold in one line, exit 2, writing nothing",
          "[cli][train_size]") {
  TempDir dir("cli-train-size-refusals");
  std::ofstream(dir / "pairs.tsv") << "a b\tb a\nc d\td c\ne f\tf e\ng h\th g\n";
  std::ofstream(dir / "text.txt") << std::string(400, 'a') + "the end\n";
  const std::string run = " --run " + dir / "never";
  const std::pair<std::string, std::string> cases[] = {
      {"--train-size -1", "--train-size must be >= 0, got -1"},
      {"--train-size 32", "--batch-size 64 is larger than --train-size 32: a batch would hold an example twice; use at "
                          "most 32 (that: the whole set every step)"},
      {"--vocab 2 --min-len 3 --max-len 3 --heldout 2 --batch-size 4 --train-size 7",
       "--train-size 7 is more than the 6 distinct inputs of task 'reverse' left after the 2 held out (of 8); lower "
       "--train-size to at most 6 or widen the task"},
      {"--task pairs --model decoder --file " + dir / "pairs.tsv" + " --heldout-fraction 0.25 --batch-size 2 --train-size 2",
       "--train-size 2 applies to generated tasks: task 'pairs' trains on the fixed set its --file holds (less the "
       "held-out part)"},
      {"--task text --model decoder --seq-len 8 --file " + dir / "text.txt" + " --batch-size 2 --train-size 2",
       "--train-size 2 applies to generated tasks: task 'text' trains on the fixed set its --file holds (less the "
       "held-out part)"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args);
    const auto r = run_attnlab("train " + args + run);
    CHECK(r.code == 2);
    CHECK(r.out == "attnlab train: " + message + "\n");
    CHECK_FALSE(fs::exists(dir / "never"));
  }
}

TEST_CASE("a --train-size run records the size in config.ini, says how it batches, and resumes bitwise",
          "[cli][train_size][resume]") {
  TempDir dir("cli-train-size-run");
  const std::string full = kTiny + " --train-size 16 --batch-size 16";
  const auto whole = run_attnlab("train" + full + " --steps 8 --run " + dir / "whole");
  REQUIRE(whole.code == 0);
  CHECK(whole.out.find("data: a fixed set of 16 training examples, the whole set in one order every step (full batch)\n") !=
        std::string::npos);
  CHECK(slurp(dir / "whole/config.ini").find("\ntrain-size = 16\n") != std::string::npos);
  REQUIRE(run_attnlab("train" + full + " --quiet --steps 4 --run " + dir / "split").code == 0);
  const auto resumed = run_attnlab("train --quiet --resume " + dir / "split" + " --steps 8");
  REQUIRE(resumed.code == 0);
  require_same_run(dir / "whole", dir / "split", 8);
  const auto mini = run_attnlab("train" + kTiny + " --train-size 16 --batch-size 4 --steps 2 --run " + dir / "mini");
  REQUIRE(mini.code == 0);
  CHECK(mini.out.find("data: a fixed set of 16 training examples, in batches of 4, reshuffled every epoch\n") !=
        std::string::npos);
  CHECK(slurp(dir / "mini/config.ini").find("\nbatch-size = 4\ntrain-size = 16\n") != std::string::npos);
  const auto stream = run_attnlab("train" + kTiny + " --batch-size 4 --steps 2 --run " + dir / "stream");
  REQUIRE(stream.code == 0);
  CHECK(stream.out.find("data:") == std::string::npos);
  CHECK(slurp(dir / "stream/config.ini").find("\ntrain-size = 0\n") != std::string::npos);
}

#ifdef ATTNLAB_MPIEXEC
TEST_CASE("full batch under mpirun -np 2 gives the bits of --grad-accum 2 on one process: the set is split, not redrawn",
          "[cli][train_size][mpi]") {
  TempDir dir("cli-train-size-mpi");
  const std::string flags = kTiny + " --train-size 24 --batch-size 24 --steps 8 --quiet";
  // As root, Open MPI needs both variables; more ranks than cores need --oversubscribe.
  const auto ranks = attnlab::testing::run_executable(
      ATTNLAB_MPIEXEC, "--oversubscribe -np 2 " + std::string(ATTNLAB_EXE) + " train" + flags + " --run " + dir / "np2",
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  INFO(ranks.out);
  REQUIRE(ranks.code == 0);
  REQUIRE(run_attnlab("train" + flags + " --grad-accum 2 --run " + dir / "accum2").code == 0);
  require_same_run(dir / "np2", dir / "accum2", 8);
}
#endif

TEST_CASE("a run whose checkpoint predates --train-size (its record lacks it) is still evaluated and resumed",
          "[cli][train_size][resume]") {
  TempDir dir("cli-train-size-old-run");
  const std::string run = dir / "old";
  REQUIRE(run_attnlab("train" + kTiny + " --batch-size 4 --steps 4 --quiet --run " + run).code == 0);
  // The same settings as the flags, to rebuild the checkpoint with a record written before the option existed.
  attnlab::TrainSettings s = attnlab::testing::tiny_reverse_settings();
  attnlab::finalize(s);
  attnlab::TrainState state(s);
  const std::string stem = attnlab::testing::checkpoint_stem(run, 4);
  attnlab::Metadata meta = attnlab::load_checkpoint(stem, state.model(), &state.optimizer());
  const std::string line = "train-size = 0\n";
  std::string& record = meta.at("train_options");
  REQUIRE(record.find(line) != std::string::npos);
  record.erase(record.find(line), line.size());
  attnlab::save_checkpoint(stem, state.model(), &state.optimizer(), meta);
  const auto eval = run_attnlab("eval --run " + run);
  INFO(eval.out);
  CHECK(eval.code == 0);
  CHECK(run_attnlab("train --quiet --resume " + run + " --steps 6").code == 0);
  // An option the record has is still checked: the edited config.ini is refused.
  std::string config = slurp(run + "/config.ini");
  config.replace(config.find("seed = 0"), 8, "seed = 5");
  std::ofstream(run + "/config.ini") << config;
  CHECK(run_attnlab("eval --run " + run).code == 2);
}
