// train --probe-induction and a modular run's embedding_fourier.csv through
// the attnlab executable: a resumed run drops the rows after its checkpoint
// and writes the rows the whole run wrote; the refusals, one line each.
// (Weights bitwise an unprobed run's: tests/test_cli_sharpness.cpp probes
// --probe-induction with the others; the rows' values: test_induction_probe.cpp.)
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;

namespace {

const char* kSmall = " --vocab 6 --min-len 4 --max-len 4 --d-model 16 --heads 2 --layers 2 --d-ff 32 --batch-size 8"
                     " --heldout 50 --quiet --threads 1 --target 0";
const char* kModular = " --task modular --modulus 7 --d-model 16 --heads 2 --layers 1 --d-ff 32 --batch-size 8"
                       " --quiet --threads 1 --target 0";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A run of `steps` whose checkpoints after `keep_through` are removed, then
// resumed to `steps`: its file `name` must be the whole run's, byte for byte.
void check_resume_rewrites(const std::string& flags, const std::string& name, int steps, int keep_through,
                           const std::string& whole_text) {
  TempDir dir("induction_resume_" + name);
  const std::string run = dir / "run";
  Result first = run_attnlab("train" + flags + " --steps " + std::to_string(steps) + " --run " + run);
  INFO(first.out);
  REQUIRE(first.code == 0);
  REQUIRE(slurp(run + "/" + name) == whole_text);
  for (const auto& entry : fs::directory_iterator(run + "/checkpoints")) {
    const std::string f = entry.path().filename().string();  // step-NNNNNNNN.*
    if (std::stoi(f.substr(5, 8)) > keep_through) fs::remove(entry.path());
  }
  const std::string before = slurp(run + "/" + name);
  Result rest = run_attnlab("train --resume " + run + " --quiet");
  INFO(rest.out);
  REQUIRE(rest.code == 0);
  CHECK(slurp(run + "/" + name) == whole_text);  // the later rows dropped, then written again once
  CHECK(before == whole_text);
}

}  // namespace

TEST_CASE("a resumed run keeps the induction rows through its checkpoint and writes the rest once", "[cli][induction]") {
  TempDir dir("induction_whole");
  const std::string flags = std::string(" --task reverse --model decoder") + kSmall + " --eval-every 3 --probe-induction 2";
  Result whole = run_attnlab("train" + flags + " --steps 6 --run " + (dir / "whole"));
  INFO(whole.out);
  REQUIRE(whole.code == 0);
  const std::string text = slurp(dir / "whole/probe_induction.csv");
  // steps 1, 2, 4, 6 x 2 layers x 2 heads, and the header
  CHECK(std::count(text.begin(), text.end(), '\n') == 1 + 16);
  CHECK(text.rfind("step,layer,head,prefix_matching,previous_token\n", 0) == 0);
  check_resume_rewrites(flags, "probe_induction.csv", 6, 3, text);
}

TEST_CASE("a modular run writes embedding_fourier.csv at each evaluation, and resumed writes the rows after its "
          "checkpoint again, once", "[cli][fourier]") {
  TempDir dir("fourier_whole");
  const std::string flags = std::string(kModular) + " --eval-every 2";
  Result whole = run_attnlab("train" + flags + " --steps 5 --run " + (dir / "whole"));
  INFO(whole.out);
  REQUIRE(whole.code == 0);
  const std::string text = slurp(dir / "whole/embedding_fourier.csv");
  CHECK(text.rfind("step,frequency,norm\n2,0,", 0) == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1 + 3 * 4);  // steps 2, 4, 5 x k = 0..3
  CHECK(text.find("\n5,3,") != std::string::npos);
  check_resume_rewrites(flags, "embedding_fourier.csv", 5, 2, text);
  // Other tasks write none.
  Result copy = run_attnlab(std::string("train --task copy") + kSmall + " --steps 2 --run " + (dir / "copy"));
  REQUIRE(copy.code == 0);
  CHECK_FALSE(fs::exists(dir / "copy/embedding_fourier.csv"));
}

TEST_CASE("train refuses --probe-induction for an encoder or seq2seq model, or a negative N, one line, exit 2",
          "[cli][induction]") {
  TempDir dir("induction_refusals");
  const std::string base = "train --task copy --vocab 6 --d-model 16 --heads 2 --layers 1 --d-ff 32 --batch-size 4"
                           " --heldout 2 --quiet --threads 1 --steps 2 --run " + (dir / "run");
  const std::pair<const char*, const char*> cases[] = {
      {" --model decoder --probe-induction -1", "--probe-induction must be >= 0, got -1"},
      {" --model encoder --probe-induction 5",
       "--probe-induction reads a decoder-only model's causal self-attention: use --model decoder, not encoder"},
      {" --model seq2seq --probe-induction 5",
       "--probe-induction reads a decoder-only model's causal self-attention: use --model decoder, not seq2seq"},
      {" --model decoder --layout bare --min-len 1 --max-len 1 --probe-induction 5",
       "--probe-induction repeats a sequence of at least 2 distinct symbols, but task 'copy' has 6 symbols and "
       "training sequences of length 1"},
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
