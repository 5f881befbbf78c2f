// End-to-end tests of the instruments through the attnlab executable:
// probes observe without changing training, gradcheck passes on the three
// models and fails on a wrong gradient, attention writes one row-stochastic
// map per layer and head.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::run_attnlab_faults;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;

namespace {

int64_t line_count(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

const char* kSmall = " --vocab 6 --min-len 5 --max-len 5 --d-model 16 --heads 2 --layers 2 --d-ff 32 --batch-size 8"
                     " --heldout 50 --quiet --threads 1 --target 0";

}  // namespace

TEST_CASE("probes change nothing: a run probed every step ends with bitwise the same weights", "[cli][probe]") {
  TempDir dir("bitwise");
  // Dropout on, so the dropout generator's stream is covered too; decoder, so masks are.
  const std::string common = std::string("train --task reverse --model decoder") + kSmall +
                             " --dropout 0.1 --steps 12 --eval-every 12 --run ";
  Result plain = run_attnlab(common + (dir / "plain"));
  INFO(plain.out);
  REQUIRE(plain.code == 0);
  Result probed = run_attnlab(common + (dir / "probed") + " --probe-every 1");
  INFO(probed.out);
  REQUIRE(probed.code == 0);
  CHECK(attnlab::testing::checkpoint_difference(dir / "plain/checkpoints/step-00000012.safetensors",
                                                dir / "probed/checkpoints/step-00000012.safetensors") == "");
  // The probe wrote a row per step and item: 12 steps x parameters; 3 stream points; 2 layers x 2 heads.
  CHECK_FALSE(fs::exists(dir / "plain/probe_params.csv"));
  CHECK(line_count(dir / "probed/probe_stream.csv") == 1 + 12 * 3);
  CHECK(line_count(dir / "probed/probe_heads.csv") == 1 + 12 * 4);
  CHECK((line_count(dir / "probed/probe_params.csv") - 1) % 12 == 0);
}

TEST_CASE("train with --probe-every N probes step 1 and every N-th step", "[cli][probe]") {
  TempDir dir("every");
  Result r = run_attnlab(std::string("train --task copy") + kSmall + " --steps 20 --eval-every 20 --probe-every 10 --run " +
                         (dir / "run"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::ifstream in(dir / "run/probe_stream.csv");
  std::string line;
  std::getline(in, line);
  std::set<std::string> steps;
  while (std::getline(in, line)) steps.insert(line.substr(0, line.find(',')));
  CHECK(steps == std::set<std::string>{"1", "10", "20"});
}

TEST_CASE("gradcheck passes for the three models and fails when one gradient is wrong", "[cli][gradcheck]") {
  const std::string dims = " --vocab 5 --min-len 4 --max-len 4 --d-model 16 --heads 2 --layers 1 --d-ff 32 --samples 8";
  for (const char* model : {"encoder", "decoder", "seq2seq"}) {
    Result r = run_attnlab(std::string("gradcheck --task reverse --model ") + model + dims);
    INFO(model << "\n" << r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find("gradcheck passed") != std::string::npos);
  }
  // A 10% error in one tensor's gradient (the test-only hook) must be caught.
  Result broken = run_attnlab_faults("gradcheck --task reverse --model encoder" + dims,
                              "ATTNLAB_GRADCHECK_BREAK=blocks.0.ff.fc1.weight");
  INFO(broken.out);
  CHECK(broken.code == 1);
  CHECK(broken.out.find("FAIL") != std::string::npos);
  CHECK(broken.out.find("blocks.0.ff.fc1.weight") != std::string::npos);
}

TEST_CASE("attention writes one map per layer and head whose rows sum to 1", "[cli][attention]") {
  TempDir dir("attention");
  for (const char* model : {"encoder", "seq2seq"}) {
    const std::string run = dir / model;
    Result r = run_attnlab(std::string("train --task reverse --model ") + model + kSmall +
                           " --steps 5 --eval-every 5 --run " + run);
    INFO(r.out);
    REQUIRE(r.code == 0);
    const std::string out = dir / (std::string(model) + "-maps");
    r = run_attnlab("attention --run " + run + " --out " + out + " \"1 2 3 4 5\"");
    INFO(r.out);
    REQUIRE(r.code == 0);
    std::ifstream meta_in(out + "/attention.json");
    REQUIRE(meta_in);
    auto meta = nlohmann::json::parse(meta_in);
    // encoder: 2 layers; seq2seq: 2 encoder + 2 x (self, cross) decoder layers; 2 heads each.
    const size_t layers = std::string(model) == "encoder" ? 2 : 6;
    REQUIRE(meta["layers"].size() == layers);
    size_t files = 0;
    for (const auto& entry : fs::directory_iterator(out)) files += entry.path().extension() == ".csv";
    CHECK(files == layers * 2);
    for (const auto& layer : meta["layers"])
      for (const auto& file : layer["files"]) {
        std::ifstream in(out + "/" + file.get<std::string>());
        REQUIRE(in);
        std::string line;
        size_t rows = 0;
        while (std::getline(in, line)) {
          std::stringstream ss(line);
          std::string f;
          double sum = 0;
          size_t cols = 0;
          while (std::getline(ss, f, ',')) {
            sum += std::stod(f);
            ++cols;
          }
          CHECK(cols == layer["keys"].size());
          // float32 softmax weights: each row sums to 1 within a few ulps times T.
          CHECK(sum == Approx(1.0).epsilon(1e-5));
          ++rows;
        }
        CHECK(rows == layer["queries"].size());
      }
  }
}
