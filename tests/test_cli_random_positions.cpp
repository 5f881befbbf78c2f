// train --random-positions P through the CLI: refused values, what config.ini
// and the checkpoint record, reproducibility, resume, and that 0 is today's run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "framework/io/checkpoint.h"
#include "framework/io/safetensors.h"
#include "models/config.h"
#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using namespace attnlab;
using attnlab::testing::checkpoint_difference;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;

namespace {

const std::string kRun =
    " --task reverse --vocab 6 --min-len 3 --max-len 5 --d-model 16 --heads 2 --layers 1 --d-ff 32"
    " --batch-size 8 --heldout 20 --eval-every 5 --target 0 --seed 3 --threads 1 --quiet";

std::string train(const TempDir& dir, const std::string& name, const std::string& flags) {
  const std::string run = dir / name;
  const auto r = run_attnlab("train" + kRun + " " + flags + " --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);
  return run;
}

std::string model_file(const std::string& run, int step) {
  char name[64];
  std::snprintf(name, sizeof name, "/checkpoints/step-%08d.safetensors", step);
  return run + name;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// One line on stderr naming the flag and the value, exit 2, no run directory.
void check_refused(const TempDir& dir, const std::string& flags, const std::string& says) {
  const auto r = run_attnlab("train" + kRun + " " + flags + " --run " + (dir / "bad"));
  INFO(flags << " -> " << r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find(says) != std::string::npos);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(dir / "bad"));
}

}  // namespace

TEST_CASE("train refuses bad --random-positions values with one line naming the value", "[cli][positions]") {
  TempDir dir("randpos-bad");
  check_refused(dir, "--random-positions -3", "--random-positions must be 0 (off) or a positive range P, got -3");
  // The decoder reads [bos] 5 [sep] 5: 12 positions.
  check_refused(dir, "--model decoder --random-positions 11",
                "--random-positions 11 is smaller than the longest training sequence (12 positions)");
  check_refused(dir, "--random-positions 40 --positions 64", "--positions is 64: give the same P");
  check_refused(dir, "--random-positions 40 --positional rope", "sinusoidal or learned, not rope");
  check_refused(dir, "--random-positions 40 --positional none", "sinusoidal or learned, not none");
}

TEST_CASE("train --random-positions: recorded in config.ini and the checkpoint, reproducible, resumable",
          "[cli][positions]") {
  TempDir dir("randpos-run");
  const std::string a = train(dir, "a", "--random-positions 40 --positional learned --steps 10");
  const std::string b = train(dir, "b", "--random-positions 40 --positional learned --steps 10");
  CHECK(checkpoint_difference(model_file(a, 10), model_file(b, 10)).empty());  // same seed, same bits
  CHECK(text_of(a + "/config.ini").find("random-positions = 40") != std::string::npos);
  const Metadata meta = load_safetensors(model_file(a, 10)).metadata;
  const TransformerConfig config = TransformerConfig::from_json(nlohmann::json::parse(meta.at("model_config")));
  CHECK(config.random_positions == 40);
  CHECK(config.max_len == 40);  // the table is the range
  // Resumed from step 5 it ends on the same bits: the positions' generator is checkpointed.
  const std::string c = train(dir, "c", "--random-positions 40 --positional learned --steps 5");
  const auto resumed = run_attnlab("train --resume " + c + " --steps 10 --quiet");
  INFO(resumed.out);
  REQUIRE(resumed.code == 0);
  CHECK(checkpoint_difference(model_file(a, 10), model_file(c, 10)).empty());
  // Off is the run without the flag; on changes the run.
  const std::string off = train(dir, "off", "--random-positions 0 --positional learned --positions 40 --steps 10");
  const std::string plain = train(dir, "plain", "--positional learned --positions 40 --steps 10");
  CHECK(checkpoint_difference(model_file(off, 10), model_file(plain, 10)).empty());
  CHECK_FALSE(checkpoint_difference(model_file(a, 10), model_file(plain, 10)).empty());
  // eval and predict read the run's positions (an even spread) and work past the trained lengths.
  const auto eval = run_attnlab("eval --run " + a + " --len 12");
  INFO(eval.out);
  CHECK(eval.code == 0);
  CHECK(eval.out.find("exact match") != std::string::npos);
}

namespace {

// The one JSON line of a command whose stderr may hold notes.
nlohmann::json json_line(const std::string& out) {
  size_t at = 0;
  while (at < out.size()) {
    const size_t end = out.find('\n', at);
    const std::string line = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (!line.empty() && line[0] == '{') return nlohmann::json::parse(line);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  FAIL("no JSON line in: " << out);
  return {};
}

}  // namespace

TEST_CASE("predict gives eval's answer for every held-out input, in every positional mode, and its "
          "probabilities choose that answer", "[cli][positions][random-positions]") {
  TempDir dir("randpos-agree");
  // Lengths 3..5 in one batch: eval's batches mix answer lengths. Few steps:
  // half-trained models ramble past <eos>, which is where plans differ.
  const std::string base = " --task reverse --vocab 6 --min-len 3 --max-len 5 --d-model 16 --heads 2 --layers 1"
                           " --d-ff 32 --batch-size 8 --heldout 12 --eval-every 40 --steps 40 --target 0 --seed 5"
                           " --threads 1 --quiet";
  const std::vector<std::string> modes = {
      "--model decoder --positional sinusoidal", "--model decoder --positional learned",
      "--model decoder --positional rope",       "--model decoder --positional none",
      "--model decoder --positional sinusoidal --random-positions 16",
      "--model decoder --positional learned --random-positions 16",
      "--model seq2seq --positional learned --random-positions 16",
      "--model encoder --positional sinusoidal --random-positions 16"};
  for (size_t m = 0; m < modes.size(); ++m) {
    INFO(modes[m]);
    const std::string run = dir / ("r" + std::to_string(m));
    const auto trained = run_attnlab("train" + base + " " + modes[m] + " --run " + run);
    INFO(trained.out);
    REQUIRE(trained.code == 0);
    const auto eval = run_attnlab("eval --run " + run + " --json --examples 12");
    INFO(eval.out);
    REQUIRE(eval.code == 0);
    const nlohmann::json examples = json_line(eval.out)["examples"];
    REQUIRE(examples.size() == 12);
    for (const auto& e : examples) {
      const std::string input = e["input"];
      INFO("input " << input << ", eval's answer " << e["answer"]);
      const auto predicted = run_attnlab("predict --run " + run + " --json \"" + input + "\"");
      REQUIRE(predicted.code == 0);
      const nlohmann::json p = json_line(predicted.out);
      CHECK(p["answer"]["text"] == e["answer"]);
      // Each decoded position's distribution peaks on the token chosen there.
      for (const auto& pos : p["positions"]) {
        const std::vector<double> probs = pos["probabilities"];
        CHECK(std::max_element(probs.begin(), probs.end()) - probs.begin() == pos["token"].get<int64_t>());
      }
      // predict --logits --top 1: the first line is the answer, each position's top token is the answer's.
      const auto logits = run_attnlab("predict --run " + run + " --logits --top 1 \"" + input + "\"");
      REQUIRE(logits.code == 0);
      std::string answer = e["answer"], chosen;
      std::istringstream lines(logits.out);
      std::string line;
      while (std::getline(lines, line)) {
        if (line.rfind("  position ", 0) != 0) continue;
        std::istringstream words(line.substr(line.find(':') + 1));
        std::string token;
        words >> token;
        if (token != "<eos>") chosen += (chosen.empty() ? "" : " ") + token;
      }
      CHECK(chosen == answer);
    }
  }
}
