// attnlab train --precision bf16 (framework/ops/gemm.h): a short run solves
// reverse, the same seed gives the same bits, the bits differ from fp32's (the
// products really ran in bf16), config.ini and summary.json record it, a resume
// keeps it, and bad values are refused in one line. On a CPU without native
// bf16 the flag is refused in one line instead, which is checked there.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "framework/ops/gemm.h"
#include "tests/cli_harness.h"

using attnlab::testing::checkpoint_difference;
using attnlab::testing::read_summary;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;

namespace {

const char* kTiny = " --task reverse --vocab 6 --min-len 5 --max-len 5 --d-model 32 --heads 2 --layers 1 --d-ff 64"
                    " --batch-size 32 --heldout 200 --quiet --lr 3e-3";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("train --precision bf16 solves reverse, bitwise reproducibly, with other bits than fp32", "[cli][bf16]") {
  TempDir dir("bf16-solve");
  const std::string a = dir / "a", b = dir / "b", fp32 = dir / "fp32";
  if (!attnlab::bf16_products_native()) {
    const Result r = run_attnlab(std::string("train") + kTiny + " --steps 10 --precision bf16 --run " + a);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(lines(r.out) == 1);
    CHECK(r.out.find("--precision bf16 is not available: ") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(a));
    WARN("no native bf16 products on this CPU: only the refusal was checked");
    return;
  }
  const std::string common = std::string("train") + kTiny + " --eval-every 50 --run ";
  Result r = run_attnlab(common + a + " --steps 600 --precision bf16");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto summary = read_summary(a);
  CHECK(summary["precision"] == "bf16");
  CHECK(summary["heldout_exact"].get<double>() == 1.0);
  const int64_t solved = summary["solved_at_step"].get<int64_t>();
  CHECK(solved > 0);
  CHECK(slurp(a + "/config.ini").find("\nprecision = bf16\n") != std::string::npos);
  REQUIRE(run_attnlab(common + b + " --steps 600 --precision bf16").code == 0);
  const std::string last = "/checkpoints/step-" + std::string(8 - std::to_string(solved).size(), '0') +
                           std::to_string(solved) + ".safetensors";
  CHECK(checkpoint_difference(a + last, b + last) == "");
  // fp32 (the default) from the same seed: other bits at the same step.
  REQUIRE(run_attnlab(common + fp32 + " --target 0 --steps " + std::to_string(solved)).code == 0);
  CHECK(read_summary(fp32)["precision"] == "fp32");
  CHECK(checkpoint_difference(a + last, fp32 + last) != "");
}

TEST_CASE("a bf16 run resumed keeps bf16, with the same bits as the run at once, and another precision is refused",
          "[cli][bf16]") {
  if (!attnlab::bf16_products_native()) return;  // the refusal is the test above
  TempDir dir("bf16-resume");
  const std::string common = std::string(kTiny) + " --target 0 --eval-every 20 --precision bf16";
  const std::string whole = dir / "whole", split = dir / "split";
  REQUIRE(run_attnlab("train" + common + " --steps 40 --run " + whole).code == 0);
  REQUIRE(run_attnlab("train" + common + " --steps 20 --run " + split).code == 0);
  Result refused = run_attnlab("train --resume " + split + " --steps 40 --precision fp32 --quiet");
  INFO(refused.out);
  CHECK(refused.code == 2);
  CHECK(lines(refused.out) == 1);
  CHECK(refused.out.find("precision") != std::string::npos);
  Result r = run_attnlab("train --resume " + split + " --steps 40 --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(read_summary(split)["precision"] == "bf16");
  CHECK(checkpoint_difference(whole + "/checkpoints/step-00000040.safetensors",
                              split + "/checkpoints/step-00000040.safetensors") == "");
}

TEST_CASE("train and bench take --precision fp32 or bf16: another value gets one line naming it, exit 2, no files", "[cli][bf16]") {
  TempDir dir("bf16-bad");
  const std::string run = dir / "never";
  for (const std::string& command : {"train" + std::string(kTiny) + " --steps 5 --run " + run, std::string("bench --config S")}) {
    const Result r = run_attnlab(command + " --precision fp16");
    INFO(command << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(lines(r.out) == 1);
    CHECK(r.out.find("--precision must be") != std::string::npos);
    CHECK(r.out.find("'fp16'") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(run));
}

TEST_CASE("bench --precision bf16 reports its precision, and the bits differ from fp32's", "[cli][bf16]") {
  if (!attnlab::bf16_products_native()) return;
  const std::string common = "bench --config S --steps 2 --warmup 0 --no-peak";
  const Result fp32 = run_attnlab(common), bf16 = run_attnlab(common + " --precision bf16");
  INFO(fp32.out << bf16.out);
  REQUIRE(fp32.code == 0);
  REQUIRE(bf16.code == 0);
  const auto f = nlohmann::json::parse(fp32.out), b = nlohmann::json::parse(bf16.out);
  CHECK(f["precision"] == "fp32");
  CHECK(b["precision"] == "bf16");
  CHECK(f["final_loss"] != b["final_loss"]);
  CHECK(std::abs(f["final_loss"].get<double>() - b["final_loss"].get<double>()) < 0.05);
}
