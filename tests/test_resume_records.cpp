// What a resumed run keeps of the record it continues (issue 42): the file
// modes the user gave, a target reached in an evaluation a signal
// interrupted, and, when its latest checkpoint cannot be read, a way back to
// the one before it.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_compare.h"

namespace fs = std::filesystem;
using namespace attnlab::testing;

namespace {

const std::string kTiny = " --task reverse --vocab 6 --min-len 4 --max-len 4 --d-model 16 --heads 2 --layers 1"
                          " --d-ff 32 --batch-size 8 --heldout 20 --threads 1 --quiet";

unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("a resumed run keeps the modes the user gave metrics.csv, config.ini and summary.json", "[cli][resume]") {
  TempDir dir("resume-modes");
  const std::string run = dir / "run";
  const CliResult first = run_attnlab("train" + kTiny + " --steps 4 --eval-every 2 --run " + run);
  INFO(first.out);
  REQUIRE(first.code == 0);
  const std::pair<const char*, unsigned> modes[] = {{"/metrics.csv", 0600}, {"/config.ini", 0640}, {"/summary.json", 0604}};
  for (const auto& [file, mode] : modes) REQUIRE(::chmod((run + file).c_str(), mode) == 0);
  const CliResult resumed = run_attnlab("train --resume " + run + " --steps 8 --quiet");
  INFO(resumed.out);
  REQUIRE(resumed.code == 0);
  REQUIRE(read_summary(run)["steps"] == 8);  // summary.json and metrics.csv were rewritten
  for (const auto& [file, mode] : modes) {
    INFO(file);
    CHECK(mode_of(run + file) == mode);
  }
}

TEST_CASE("a corrupt latest checkpoint is refused on --resume with one line that says the one before it is intact "
          "and how to resume from it, and that way works", "[cli][resume]") {
  TempDir dir("resume-corrupt-latest");
  const std::string run = dir / "run";
  const CliResult first = run_attnlab("train" + kTiny + " --steps 6 --eval-every 2 --keep 3 --run " + run);
  INFO(first.out);
  REQUIRE(first.code == 0);
  const std::string model = checkpoint_stem(run, 6) + ".safetensors", optim = checkpoint_stem(run, 6) + ".optim.safetensors";
  fs::resize_file(optim, 3000);
  const CliResult refused = run_attnlab("train --resume " + run + " --steps 8");
  INFO(refused.out);
  CHECK(refused.code == 2);
  CHECK(std::count(refused.out.begin(), refused.out.end(), '\n') == 1);
  const std::string said = "; the checkpoint before it (step 4) is intact: to resume from it, move " + model + " and " +
                           optim + " out of the run directory, then run: attnlab train --resume " + run + " --steps 8\n";
  REQUIRE(refused.out.size() > said.size());
  CHECK(refused.out.substr(refused.out.size() - said.size()) == said);
  fs::rename(model, dir / "model");
  fs::rename(optim, dir / "optim");
  const CliResult resumed = run_attnlab("train --resume " + run + " --steps 8 --quiet");
  INFO(resumed.out);
  CHECK(resumed.code == 0);
  CHECK(read_summary(run)["steps"] == 8);

  // Nothing before it: the line says so.
  const std::string alone = dir / "alone";
  REQUIRE(run_attnlab("train" + kTiny + " --steps 2 --eval-every 2 --run " + alone).code == 0);
  fs::resize_file(checkpoint_stem(alone, 2) + ".optim.safetensors", 3000);
  const CliResult none = run_attnlab("train --resume " + alone + " --steps 4");
  INFO(none.out);
  CHECK(none.code == 2);
  CHECK_THAT(none.out, Catch::EndsWith("; no earlier checkpoint is kept (--keep), so the run cannot be resumed\n"));
}
