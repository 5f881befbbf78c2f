// train --tensorboard through the attnlab executable: which event files a run
// holds (one per invocation, none without the flag) and that they count as
// attnlab's files (--overwrite removes them). Their contents are checked
// against TensorBoard's definitions by tests/test_tensorboard_runs.py.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;

namespace {

const std::string kTiny =
    " --task reverse --vocab 6 --min-len 4 --max-len 5 --d-model 16 --heads 2 --layers 1 --d-ff 32 --batch-size 16"
    " --heldout 50 --log-every 5 --eval-every 10 --threads 1 --quiet";

std::vector<std::string> event_files(const std::string& run) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) out.push_back(e.path().string());
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("train --tensorboard writes one event file per invocation, is saved in config.ini, none without the flag",
          "[cli][tensorboard]") {
  TempDir tmp("cli-tensorboard");
  const auto plain = run_attnlab("train" + kTiny + " --steps 10 --run " + tmp / "plain");
  REQUIRE(plain.code == 0);
  CHECK(event_files(tmp / "plain").empty());
  CHECK(read_text(tmp / "plain/config.ini").find("tensorboard = false") != std::string::npos);

  const auto on = run_attnlab("train" + kTiny + " --steps 10 --tensorboard --run " + tmp / "on");
  REQUIRE(on.code == 0);
  CHECK(event_files(tmp / "on").size() == 1);
  CHECK(read_text(tmp / "on/config.ini").find("tensorboard = true") != std::string::npos);

  // config.ini says true: a resumed run keeps writing, to a new file.
  const auto resumed = run_attnlab("train --resume " + tmp / "on" + " --steps 20 --quiet");
  REQUIRE(resumed.code == 0);
  CHECK(event_files(tmp / "on").size() == 2);
  // A run started without it may turn it on when resumed.
  const auto later = run_attnlab("train --resume " + tmp / "plain" + " --steps 20 --tensorboard --quiet");
  REQUIRE(later.code == 0);
  CHECK(event_files(tmp / "plain").size() == 1);
}

TEST_CASE("train --overwrite counts a run holding event files as attnlab's and removes them", "[cli][tensorboard]") {
  TempDir tmp("cli-tensorboard-overwrite");
  const std::string run = tmp / "run";
  REQUIRE(run_attnlab("train" + kTiny + " --steps 10 --tensorboard --run " + run).code == 0);
  REQUIRE(event_files(run).size() == 1);
  const auto again = run_attnlab("train" + kTiny + " --steps 10 --overwrite --run " + run);
  INFO(again.out);
  REQUIRE(again.code == 0);
  CHECK(event_files(run).empty());
}
