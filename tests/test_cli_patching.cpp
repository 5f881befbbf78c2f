// attnlab patch through the executable: its tables and JSON on a trained
// reverse encoder (the embeddings at the corrupted position restore all of the
// logit difference, the other positions none), --corrupt-token over held-out
// inputs, and every refusal: one line, exit 2, no --logits file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using Catch::Matchers::WithinAbs;

namespace {

const char* kRun = " --task reverse --vocab 6 --min-len 5 --max-len 5 --d-model 16 --heads 2 --layers 2 --d-ff 32"
                   " --steps 30 --eval-every 30 --heldout 40 --quiet --threads 1";
const char* kPair = " --clean \"3 1 4 1 5\" --corrupt \"3 1 2 1 5\"";

nlohmann::json patch_json(const std::string& args) {
  const attnlab::testing::CliResult r = run_attnlab("patch " + args + " --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("attnlab patch prints the metric, the inputs and tables whose numbers are its JSON's", "[cli][patch]") {
  TempDir dir("cli-patch");
  const std::string run = dir / "rev";
  REQUIRE(run_attnlab(std::string("train") + kRun + " --run " + run).code == 0);
  const attnlab::testing::CliResult text = run_attnlab("patch --run " + run + kPair + " --per-position");
  INFO(text.out);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, StartsWith("activation patching of " + run + " (step "));
  CHECK_THAT(text.out, Contains(", encoder)\n"
                                  "clean    3 1 4 1 5  ->  5 1 4 1 3\n"
                                  "corrupt  3 1 2 1 5  ->  5 1 2 1 3\n"
                                  "metric: fraction of the logit difference restored, (LD_patched - LD_corrupt) /\n"));
  CHECK_THAT(text.out, Contains("\nanswer position 2 (clean 4, corrupt 2): LD_clean "));
  CHECK_THAT(text.out, Contains("\nresidual stream         3     1  4/2*     1     5\n"
                                "blocks.0.resid_pre   0.00  0.00  1.00  0.00  0.00\n"));
  CHECK_THAT(text.out, Contains("\nheads per position     3     1  4/2*     1     5\n"));
  CHECK_THAT(text.out, Contains("\nheads (all positions)   all\nblocks.0.attn.h0 "));

  const nlohmann::json r = patch_json("--run " + run + kPair + " --per-position");
  CHECK(r["mode"] == "pair");
  CHECK(r["metric"].get<std::string>().rfind("fraction of the logit difference restored", 0) == 0);
  CHECK(r["stacks"][0]["corrupted"] == nlohmann::json::array({2}));
  CHECK(r["stacks"][0]["clean_tokens"] == nlohmann::json::array({"3", "1", "4", "1", "5"}));
  REQUIRE(r["answers"].size() == 1);
  CHECK(r["answers"][0]["index"] == 2);
  CHECK(r["answers"][0]["corrupt_token"] == "2");
  const nlohmann::json& residual = r["total"]["residual"];
  REQUIRE(residual.size() == 3);  // two blocks' resid_pre and the last resid_post
  CHECK(residual[2]["point"] == "blocks.1.resid_post");
  for (size_t t = 0; t < 5; ++t) {
    // The input differs only at position 2, and reverse's answer 2 is read from position 2's stream.
    CHECK_THAT(residual[0]["values"][t].get<double>(), WithinAbs(t == 2 ? 1 : 0, 1e-5));
    CHECK_THAT(residual[2]["values"][t].get<double>(), WithinAbs(t == 2 ? 1 : 0, 1e-5));
  }
  CHECK(r["total"]["heads"].size() == 4);
  CHECK(r["total"]["heads_per_position"].size() == 4);
  CHECK(r["total"]["residual"] == r["answers"][0]["residual"]);  // one answer position: the total is it
}

TEST_CASE("attnlab patch --corrupt-token K averages over held-out inputs with the symbol at K changed", "[cli][patch]") {
  TempDir dir("cli-patch-token");
  const std::string run = dir / "rev";
  REQUIRE(run_attnlab(std::string("train") + kRun + " --run " + run).code == 0);
  const nlohmann::json r = patch_json("--run " + run + " --corrupt-token 1 --heldout 6");
  CHECK(r["mode"] == "corrupt_token");
  CHECK(r["corrupt_token"] == 1);
  CHECK(r["pairs"] == 6);
  REQUIRE(r["examples"].size() == 6);
  for (const auto& e : r["examples"]) {
    const std::string clean = e["clean"], corrupt = e["corrupt"];
    CHECK(clean.size() == corrupt.size());
    for (size_t i = 0; i < clean.size(); ++i) CHECK((clean[i] != corrupt[i]) == (i == 2));  // symbol 1 is at column 2
  }
  CHECK(r["stacks"][0]["clean_tokens"].is_null());
  CHECK(r["answers"].empty());
  CHECK_THAT(r["total"]["residual"][0]["values"][1].get<double>(), WithinAbs(1, 1e-5));
  CHECK_THAT(r["total"]["residual"][0]["values"][3].get<double>(), WithinAbs(0, 1e-5));
  // The same seed draws the same symbols; another seed others.
  CHECK(patch_json("--run " + run + " --corrupt-token 1 --heldout 6")["examples"] == r["examples"]);
  CHECK(patch_json("--run " + run + " --corrupt-token 1 --heldout 6 --seed 2")["examples"] != r["examples"]);
}

TEST_CASE("attnlab patch refuses bad input with one line, exit 2 and no --logits file", "[cli][patch]") {
  TempDir dir("cli-patch-refusals");
  const std::string run = dir / "rev", empty = dir / "empty", logits = dir / "logits.json";
  REQUIRE(run_attnlab(std::string("train") + kRun + " --run " + run).code == 0);
  fs::copy(run, empty, fs::copy_options::recursive);
  for (const auto& f : fs::directory_iterator(empty + "/checkpoints")) fs::remove(f.path());
  const std::string r = " --run " + run;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "--run DIR is required"},
      {r, "nothing to patch: give --clean and --corrupt, or --corrupt-token K"},
      {r + " --clean \"3 1 4 1 5\"", "--clean needs --corrupt beside it"},
      {r + kPair + " --corrupt-token 1", "--corrupt-token generates the corrupted inputs; give it or --clean and --corrupt, not both"},
      {r + kPair + " --heldout 3", "--heldout counts the inputs of --corrupt-token; it needs it"},
      {r + " --corrupt-token 1 --heldout 0", "--heldout must be in [1, 100000], got 0"},
      {r + " --corrupt-token 5", "--corrupt-token 5 is out of range: the held-out inputs have at most 5 tokens (positions 0-4)"},
      {r + " --corrupt-token -1", "--corrupt-token must be >= 0 (0 = the first position), got -1"},
      {r + " --clean \"3 1 x 1 5\" --corrupt \"3 1 2 1 5\"",
       "--clean \"3 1 x 1 5\": unknown symbol 'x' (known: 0..5 and <pad> <bos> <eos> <sep>)"},
      {r + " --clean \"3 1 4 1 5\" --corrupt \"3 1 2 1\"",
       "the clean and corrupted inputs differ in length (clean 5 tokens, corrupt 4 tokens): patching copies activations "
       "position by position and needs equal lengths"},
      {r + " --clean \"3 1 4 1 5\" --corrupt \"3 1 4 1 5\"",
       "the clean and corrupted inputs have the same answer at every position: nothing to restore"},
      {" --run " + empty + kPair, "run directory '" + empty + "' has no checkpoint yet"},
      {r + " --corrupt-token 1 --logits " + logits, "--logits writes one pair's logits; it needs --clean and --corrupt"},
  };
  for (const auto& [args, line] : cases) {
    // --logits goes with a pair; with --corrupt-token it is a refusal of its own (below).
    const bool pair = args.find("--clean") != std::string::npos;
    const attnlab::testing::CliResult out = run_attnlab("patch" + args + (pair ? " --logits " + logits : ""));
    INFO(args);
    CHECK(out.code == 2);
    CHECK(out.out == "attnlab patch: " + line + "\n");
    CHECK(!fs::exists(logits));
  }
}

TEST_CASE("attnlab patch: an input the task cannot answer is named with the task's reason", "[cli][patch]") {
  TempDir dir("cli-patch-add");
  const std::string run = dir / "add";
  REQUIRE(run_attnlab("train --task add --digits 2 --model encoder --d-model 16 --heads 2 --layers 1 --d-ff 32 --steps 2"
                      " --heldout 10 --quiet --threads 1 --run " + run).code == 0);
  const attnlab::testing::CliResult out = run_attnlab("patch --run " + run + " --clean \"12+34\" --corrupt \"12++4\"");
  CHECK(out.code == 2);
  CHECK(out.out == "attnlab patch: --corrupt \"12++4\": the task cannot answer it (add: the input '12++4' must contain "
                   "exactly one '+')\n");
}
