// A signal at any instant of `attnlab train` (issue 42): the fault-injection
// build sends itself SIGINT at the K-th test point (framework/io/test_point.h:
// the run directory made or locked, every file about to be renamed into
// place, every step and every held-out batch), and a second one at another,
// so every instant is hit on purpose, not by luck. Each time the run must be
// either nothing or a run that the command its message names continues, and
// the continued run must equal the uninterrupted one in every file, time
// fields aside.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/run_compare.h"

namespace fs = std::filesystem;
using attnlab::testing::CliResult;
using attnlab::testing::run_difference;
using attnlab::testing::run_attnlab;
using attnlab::testing::run_attnlab_faults;
using attnlab::testing::slurp;
using attnlab::testing::TempDir;

namespace {

// 7 steps, evaluations at 3, 6 and 7 over 2 batches (260 examples), a row
// every 2 steps (so a stop at step 1 or 5 falls between rows), one checkpoint kept.
const std::string kShape = " --task reverse --vocab 8 --min-len 4 --max-len 5 --d-model 16 --heads 2 --layers 1"
                           " --d-ff 32 --batch-size 8 --heldout 260 --eval-every 3 --log-every 2 --keep 1 --threads 1"
                           " --quiet";
// Solved (every held-out answer right: the default --target 1) at the evaluation of step 9 of 30.
const std::string kSolved = " --task copy --vocab 6 --min-len 2 --max-len 2 --d-model 16 --heads 2 --layers 1"
                            " --d-ff 32 --batch-size 8 --heldout 8 --eval-every 3 --log-every 2 --lr 0.01 --keep 1"
                            " --threads 1 --quiet";

// Whether the run holds a complete checkpoint: a model file and its optimizer file.
bool has_checkpoint(const std::string& run) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run + "/checkpoints", ec)) {
    const std::string name = entry.path().string(), optim = ".optim.safetensors";
    if (name.size() > optim.size() && name.compare(name.size() - optim.size(), optim.size(), optim) == 0 &&
        entry.path().filename().string()[0] != '.' &&
        fs::exists(name.substr(0, name.size() - optim.size()) + ".safetensors"))
      return true;
  }
  return false;
}

// Continues an interrupted `command` as its output says; "" when that worked.
std::string continue_run(const std::string& command, const std::string& run, int steps, const CliResult& r) {
  if (r.code == 0) return "";  // the signal came after the last file: nothing was lost
  if (r.code != 130) return "exit " + std::to_string(r.code) + " instead of 130";
  const size_t at = r.out.find("Resume with: attnlab ");
  if (r.out.find("interrupted again; exiting at once") != std::string::npos) {
    const bool intact = r.out.find("(the last checkpoint is intact)") != std::string::npos;
    if (intact != has_checkpoint(run)) return "the second signal's message is wrong about the checkpoint";
    const bool exists = fs::exists(run);
    const std::string again = intact ? "train --resume " + run + " --steps " + std::to_string(steps)
                                     : command + (exists ? " --overwrite" : "");
    const CliResult resumed = run_attnlab(again);
    return resumed.code == 0 ? "" : "'" + again + "' gave exit " + std::to_string(resumed.code) + ": " + resumed.out;
  }
  if (at == std::string::npos) return "no resume command in the message";
  const size_t end = r.out.find('\n', at);
  const std::string again = r.out.substr(at + 21, end - at - 21);
  const CliResult resumed = run_attnlab(again);
  return resumed.code == 0 ? "" : "'" + again + "' gave exit " + std::to_string(resumed.code) + ": " + resumed.out;
}

long long test_points(const CliResult& r) {
  const size_t at = r.out.find("test points: ");
  REQUIRE(at != std::string::npos);
  return std::stoll(r.out.substr(at + 13));
}

// Every test point once and (with `twice`) twice (both signals at it),
// then pairs drawn with a fixed seed up to `total`: interruptions of `args`,
// each continued and compared. Returns the number of test points.
long long interrupt_everywhere(const std::string& name, const std::string& args, int steps, bool twice, size_t total) {
  TempDir dir(name);
  const std::string run = dir / "run", reference = dir / "reference";
  const std::string command = "train" + args + " --steps " + std::to_string(steps) + " --run " + run;
  const CliResult counted = run_attnlab_faults(command, "ATTNLAB_DEBUG_COUNT_POINTS=1");
  INFO(counted.out);
  REQUIRE(counted.code == 0);
  const long long points = test_points(counted);
  REQUIRE(points >= 10);
  fs::rename(run, reference);
  std::vector<std::string> cases;
  for (long long k = 1; k <= points; ++k) {
    cases.push_back(std::to_string(k));
    if (twice) cases.push_back(std::to_string(k) + "," + std::to_string(k));
  }
  std::mt19937 rng(42);
  while (cases.size() < total) {
    const long long first = std::uniform_int_distribution<long long>(1, points)(rng);
    const long long second = std::uniform_int_distribution<long long>(first, points)(rng);
    cases.push_back(std::to_string(first) + "," + std::to_string(second));
  }
  for (const std::string& at : cases) {
    const CliResult r = run_attnlab_faults(command, "ATTNLAB_DEBUG_SIGNAL_AT=" + at);
    INFO("SIGINT at test points " << at << " of " << points << ": " << r.out);
    REQUIRE(continue_run(command, run, steps, r) == "");
    REQUIRE(run_difference(reference, run) == "");
    fs::remove_all(run);
  }
  return points;
}

}  // namespace

TEST_CASE("SIGINT once or twice at 200 instants of train, from its claim of the run directory to its last file, "
          "leaves nothing or a run that its message continues to the files of the run never stopped",
          "[cli][signals][instants]") {
  interrupt_everywhere("instants", kShape, 7, true, 200);
}

TEST_CASE("SIGINT at any instant of a run that reaches its target at step 9 of 30, the evaluation that reaches it "
          "included, and the continued run stops at step 9 too, with the same files", "[cli][signals][instants]") {
  const long long points = interrupt_everywhere("instants-target", kSolved, 30, false, 0);
  CHECK(points < 40);  // it stopped at step 9: 30 steps alone would be 30 test points and more
}

TEST_CASE("a directory a second signal left mid-claim, holding only .lock and the marker's temporary, is taken by the "
          "same command and by --overwrite", "[cli][signals]") {
  TempDir dir("instants-half-claimed");
  for (const std::string extra : {"", " --overwrite"}) {
    const std::string run = dir / ("run" + extra.substr(extra.empty() ? 0 : 3));
    fs::create_directories(run);
    std::ofstream(run + "/.lock") << "pid 999999\n";
    std::ofstream(run + "/..attnlab-run.tmp.Ab12Cd") << "attnlab run";
    const CliResult r = run_attnlab("train" + kShape + " --steps 3" + extra + " --run " + run);
    INFO(extra << ": " << r.out);
    CHECK(r.code == 0);
    CHECK_FALSE(fs::exists(run + "/..attnlab-run.tmp.Ab12Cd"));
    CHECK(slurp(run + "/.attnlab-run") == "attnlab run directory, format 1\n");
  }
}
