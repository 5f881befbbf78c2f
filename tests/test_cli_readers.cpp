// The commands that read a run (eval, predict, attention, report): they do not
// race the run's writer (a checkpoint removed between their choice and their
// read is chosen again), they refuse a config.ini edited since the checkpoint
// as --resume does, they run as one process, and what they print and write
// says what it should (an empty --out, a run path ending in '/', a full disk).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/child_process.h"
#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::checkpoint_stem;
using attnlab::testing::CliResult;
using attnlab::testing::run_attnlab;
using attnlab::testing::run_attnlab_faults;
using attnlab::testing::run_executable;
using attnlab::testing::slurp;
using attnlab::testing::TempDir;
using Catch::Matchers::Contains;

namespace {

// A run that trains in a second: reverse on 5 symbols, one small layer.
const std::string kShape = " --task reverse --vocab 6 --min-len 5 --max-len 5 --d-model 16 --heads 2 --layers 1 --d-ff 32"
                           " --batch-size 8 --heldout 20 --target 0 --threads 1";
const std::string kRun = kShape + " --quiet";

int64_t line_count(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

bool has_checkpoint(const std::string& run, int step) {
  return fs::exists(checkpoint_stem(run, step) + ".safetensors");
}

// What a reader of `run` says when the first `removed` checkpoints it chooses
// are removed just before it opens them (tests/fault_injection_main.cpp).
CliResult reading_while_removed(const std::string& command, int removed) {
  return run_attnlab_faults(command, "ATTNLAB_DEBUG_REMOVE_CHOSEN_CHECKPOINTS=" + std::to_string(removed));
}

}  // namespace

TEST_CASE("eval, predict and attention read the newest checkpoint again when the one they chose is removed before "
          "they open it (as a run training with --keep removes them), a bounded number of times",
          "[cli][readers]") {
  TempDir dir("readers-rotated");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kRun + " --steps 10 --eval-every 1 --keep 10 --run " + run).code == 0);
  REQUIRE(has_checkpoint(run, 10));

  const CliResult eval = reading_while_removed("eval --run " + run, 1);
  INFO(eval.out);
  CHECK(eval.code == 0);
  CHECK_THAT(eval.out, Contains("run " + run + " (step 9)"));
  CHECK_FALSE(has_checkpoint(run, 10));

  const CliResult predict = reading_while_removed("predict --run " + run + " \"1 2 3 4 5\"", 1);
  INFO(predict.out);
  CHECK(predict.code == 0);
  CHECK_FALSE(has_checkpoint(run, 9));

  const CliResult attention = reading_while_removed("attention --run " + run + " --out " + (dir / "maps") + " \"1 2 3\"", 1);
  INFO(attention.out);
  CHECK(attention.code == 0);
  CHECK(nlohmann::json::parse(slurp(dir / "maps/attention.json"))["step"] == 7);

  // Removed at every choice: the reader gives up after 5 choices with one line, it never waits or loops on.
  const CliResult racing = reading_while_removed("eval --run " + run, 100);
  INFO(racing.out);
  CHECK(racing.code == 2);
  CHECK(racing.out == "attnlab eval: the latest checkpoint of run '" + run +
                          "' was removed while being read, 5 times (the run is training and keeps only its newest "
                          "--keep); try again\n");
  CHECK(has_checkpoint(run, 1));
  CHECK(has_checkpoint(run, 2));
  CHECK_FALSE(has_checkpoint(run, 3));

  // A step the user named is not replaced by another one.
  const CliResult named = reading_while_removed("eval --run " + run + " --step 2", 1);
  INFO(named.out);
  CHECK(named.code == 2);
  CHECK_THAT(named.out, Contains("run '" + run + "' has no checkpoint of step 2 (it was removed while being read"));
  CHECK(line_count(named.out) == 1);
}

TEST_CASE("eval, predict, attention and report refuse a config.ini edited since the checkpoint (task, lengths, seed, "
          "held-out size) as --resume does, naming both values, and not an option --resume may change",
          "[cli][readers]") {
  TempDir dir("readers-edited");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kRun + " --steps 2 --eval-every 2 --run " + run).code == 0);
  const std::string config = slurp(run + "/config.ini");
  const auto edit = [&](const std::string& from, const std::string& to) {
    std::string text = config;
    REQUIRE(text.find("\n" + from + "\n") != std::string::npos);
    text.replace(text.find("\n" + from + "\n") + 1, from.size(), to);
    std::ofstream(run + "/config.ini") << text;
  };
  const std::vector<std::string> readers = {"eval --run " + run, "predict --run " + run + " \"1 2 3 4 5\"",
                                            "attention --run " + run + " --out " + (dir / "maps") + " \"1 2 3\"",
                                            "report " + run + " --out " + (dir / "page.html")};
  const std::map<std::string, std::string> edits = {{"task = reverse", "task = copy"},
                                                    {"min-len = 5", "min-len = 4"},
                                                    {"seed = 0", "seed = 7"},
                                                    {"heldout = 20", "heldout = 10"}};
  for (const auto& [from, to] : edits) {
    edit(from, to);
    for (const std::string& reader : readers) {
      const CliResult r = run_attnlab(reader);
      INFO(reader << " with " << to << " -> " << r.out);
      CHECK(r.code == 2);
      CHECK_THAT(r.out, Contains(run + "/config.ini gives " + to + ", but the checkpoint of step 2 was trained with " +
                                 from + " (was config.ini edited? restore it, or train a new run)"));
      CHECK(line_count(r.out) == 1);
    }
  }
  CHECK_FALSE(fs::exists(dir / "maps"));
  CHECK_FALSE(fs::exists(dir / "page.html"));
  edit("steps = 2", "steps = 40");  // how long the run goes: --resume may change it, and it changes no answer
  const CliResult longer = run_attnlab("eval --run " + run);
  INFO(longer.out);
  CHECK(longer.code == 0);
}

TEST_CASE("started as 2 processes (mpirun -np 2), the one-process commands refuse: rank 0 prints one line, every rank "
          "exits 2 at once, nothing is read or written",
          "[cli][readers][mpi]") {
  TempDir dir("readers-mpirun");
  const std::string line = "this command runs as one process, not as 2 under mpirun; run it without mpirun (only train "
                           "and bench --comm run as several)\n";
  for (const std::string command : {"eval", "predict", "attention", "report", "sample", "tasks", "gradcheck", "hooks"}) {
    const std::string args = command + " --run " + (dir / "nothing") + " \"1 2 3\"";
    const CliResult first = run_attnlab(args, "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0");
    INFO(command << " -> " << first.out);
    CHECK(first.code == 2);
    CHECK(first.out == "attnlab " + command + ": " + line);
    const CliResult second = run_attnlab(args, "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1");
    INFO(second.out);
    CHECK(second.code == 2);
    CHECK(second.out == "");
  }
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("report --out '' is refused with one line, not taken as the default RUN/report.html", "[cli][readers][report]") {
  TempDir dir("readers-report-out");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kRun + " --steps 2 --eval-every 2 --run " + run).code == 0);
  const CliResult r = run_attnlab("report " + run + " --out ''");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out == "attnlab report: --out needs a path, got an empty one\n");
  CHECK_FALSE(fs::exists(run + "/report.html"));
}

TEST_CASE("report names a run by its directory however its path is written: RUN/, RUN/. and RUN give the same name",
          "[cli][readers][report]") {
  TempDir dir("readers-report-name");
  const std::string run = dir / "rev-run";
  REQUIRE(run_attnlab("train" + kRun + " --steps 2 --eval-every 2 --run " + run).code == 0);
  for (const std::string& path : {run, run + "/", run + "//", run + "/."}) {
    const CliResult r = run_attnlab("report " + path + " --out " + (dir / "page.html"));
    INFO(path << " -> " << r.out);
    REQUIRE(r.code == 0);
    const std::string page = slurp(dir / "page.html");
    CHECK_THAT(page, Contains("\"name\":\"rev-run\""));
    CHECK_FALSE(page.find("\"name\":\"\"") != std::string::npos);
  }
}

TEST_CASE("output that a full disk refuses (> /dev/full) is exit 1 naming ENOSPC, whichever command wrote it",
          "[cli][readers][errors]") {
  TempDir dir("readers-full");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kRun + " --steps 2 --eval-every 2 --run " + run).code == 0);
  const std::map<std::string, std::string> commands = {{"tasks", "tasks"},
                                                       {"eval", "eval --run " + run + " --json --examples 20"},
                                                       {"predict", "predict --run " + run + " --json \"1 2 3 4 5\""},
                                                       {"--help", "--help"},
                                                       // progress lines first: the failure long before the end
                                                       {"train", "train" + kShape + " --steps 4 --eval-every 2 --log-every 1 "
                                                                 "--run " + (dir / "printing")}};
  for (const auto& [name, args] : commands) {
    // stderr to the pipe the test reads, stdout to the full device.
    const CliResult r = run_executable("sh", "-c '" + std::string(ATTNLAB_EXE) + " " + args + " 2>&1 >/dev/full'", "");
    INFO(args << " -> " << r.out);
    CHECK(r.code == 1);
    CHECK(r.out == "attnlab " + name + ": could not write the output to standard output (No space left on device)\n");
  }
}
