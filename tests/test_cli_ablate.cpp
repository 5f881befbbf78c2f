// attnlab ablate end to end: the table and --json agree, rows sorted by
// effect, --top, --csv written atomically and never over a file of the
// user's, and bad input refused with one line, exit 2, nothing written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/effect_bar.h"
#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const char* kTiny = " --task reverse --model encoder --vocab 6 --min-len 4 --max-len 6 --d-model 16 --heads 2 --layers 2"
                    " --d-ff 32 --batch-size 8 --heldout 40 --quiet --threads 1 --target 0 --steps 30 --eval-every 30";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json ablate_json(const std::string& args) {
  const auto r = run_attnlab("ablate " + args + " --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("ablate prints the intact row first and every component sorted by effect, and --json and --top agree", "[cli][ablate]") {
  TempDir dir("ablate-table");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + std::string(kTiny) + " --run " + run).code == 0);
  const nlohmann::json all = ablate_json("--run " + run);
  CHECK(all["mode"] == "zero");
  CHECK(all["examples"] == 40);
  CHECK(all["components"] == 8);  // 2 blocks x (2 heads, the MLP, the block)
  REQUIRE(all["rows"].size() == 8);
  for (size_t i = 1; i < all["rows"].size(); ++i) {
    const auto &a = all["rows"][i - 1], &b = all["rows"][i];
    CHECK(a["exact_match"].get<double>() <= b["exact_match"].get<double>());
    if (a["exact_match"] == b["exact_match"]) CHECK(a["loss"].get<double>() >= b["loss"].get<double>());
  }
  for (const auto& r : all["rows"]) {
    CHECK(r["delta_loss"].get<double>() == r["loss"].get<double>() - all["intact"]["loss"].get<double>());
    CHECK(r["delta_exact_match"].get<double>() == r["exact_match"].get<double>() - all["intact"]["exact_match"].get<double>());
  }
  const nlohmann::json top = ablate_json("--run " + run + " --top 3");
  REQUIRE(top["rows"].size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(top["rows"][i] == all["rows"][i]);

  const auto table = run_attnlab("ablate --run " + run + " --top 3");
  REQUIRE(table.code == 0);
  std::istringstream lines(table.out);
  std::string line;
  std::getline(lines, line);
  CHECK_THAT(line, StartsWith("ablation of " + run + " (step 30), mode zero: 40 held-out examples, 3 of 8 components"));
  std::getline(lines, line);
  CHECK_THAT(line, StartsWith("component") && Contains("exact") && Contains("d.loss") && Contains("effect"));
  std::getline(lines, line);
  CHECK_THAT(line, StartsWith("intact "));
  char expected[32];
  std::snprintf(expected, sizeof expected, "%.2f%%", 100 * all["intact"]["exact_match"].get<double>());
  CHECK_THAT(line, Contains(expected));
  for (size_t i = 0; i < 3; ++i) {
    std::getline(lines, line);
    CHECK_THAT(line, StartsWith(all["rows"][i]["component"].get<std::string>() + " "));
  }
  CHECK_FALSE(std::getline(lines, line));

}

TEST_CASE("ablate's table draws each row's effect bar, by the drop in exact match or else the rise in loss",
          "[cli][ablate]") {
  TempDir dir("ablate-bars");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + std::string(kTiny) + " --run " + run).code == 0);
  const nlohmann::json all = ablate_json("--run " + run);
  bool by_exact = false;
  for (const auto& r : all["rows"]) by_exact = by_exact || r["delta_exact_match"].get<double>() < 0;
  const auto effect = [&](const nlohmann::json& r) {
    return by_exact ? -r["delta_exact_match"].get<double>() : r["delta_loss"].get<double>();
  };
  double largest = 0;
  for (const auto& r : all["rows"]) largest = std::max(largest, effect(r));
  REQUIRE(largest > 0);
  const auto table = run_attnlab("ablate --run " + run);
  REQUIRE(table.code == 0);
  std::istringstream lines(table.out);
  std::string line;
  for (int skip = 0; skip < 3; ++skip) std::getline(lines, line);  // the title, the header and intact
  bool some_between = false;
  for (const auto& r : all["rows"]) {
    REQUIRE(std::getline(lines, line));
    const int bar = attnlab::cli::effect_bar(effect(r), largest, 20);  // the rule: tests/test_effect_bar.cpp
    some_between = some_between || (bar > 0 && bar < 20);
    const size_t hashes = line.find('#') == std::string::npos ? 0 : line.size() - line.find('#');
    INFO(line << " (effect " << effect(r) << " of " << largest << ")");
    CHECK(hashes == static_cast<size_t>(bar));
    if (bar > 0) CHECK(line.substr(line.size() - static_cast<size_t>(bar)) == std::string(static_cast<size_t>(bar), '#'));
  }
  INFO("the run's effects leave no bar between the longest and none");
  CHECK(some_between);
}

TEST_CASE("ablate --csv writes the rows, and an existing file is refused without --overwrite", "[cli][ablate]") {
  TempDir dir("ablate-csv");
  const std::string run = dir / "run", csv = dir / "ablation.csv";
  REQUIRE(run_attnlab("train" + std::string(kTiny) + " --run " + run).code == 0);
  auto r = run_attnlab("ablate --run " + run + " --mode mean --what blocks.1.attn.h0,blocks.0.mlp --csv " + csv + " --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["mode"] == "mean");
  const std::string text = read(csv);
  CHECK_THAT(text, StartsWith("component,kind,exact_match,token_accuracy,loss,delta_exact_match,delta_token_accuracy,"
                              "delta_loss\nintact,intact," + j["intact"]["exact_match"].dump() + ","));
  CHECK_THAT(text, Contains("\n" + j["rows"][0]["component"].get<std::string>() + "," + j["rows"][0]["kind"].get<std::string>()));
  r = run_attnlab("ablate --run " + run + " --csv " + csv);
  CHECK(r.code == 2);
  CHECK(r.out == "attnlab ablate: --csv refuses to write '" + csv + "': it exists; pass --overwrite to replace it\n");
  CHECK(read(csv) == text);
  CHECK(run_attnlab("ablate --run " + run + " --what blocks.0 --csv " + csv + " --overwrite").code == 0);
  CHECK(read(csv) != text);
}

TEST_CASE("ablate --together knocks out the --what components at once: one row named 'a + b', kind group", "[cli][ablate]") {
  TempDir dir("ablate-together");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + std::string(kTiny) + " --run " + run).code == 0);
  const std::string what = " --what blocks.1.attn.h0,blocks.1.attn.h1,blocks.0.mlp";
  const nlohmann::json joint = ablate_json("--run " + run + " --mode mean --together" + what);
  CHECK(joint["components"] == 1);
  REQUIRE(joint["rows"].size() == 1);
  const nlohmann::json& row = joint["rows"][0];
  CHECK(row["component"] == "blocks.1.attn.h0 + blocks.1.attn.h1 + blocks.0.mlp");
  CHECK(row["kind"] == "group");
  CHECK(row["delta_loss"].get<double>() == row["loss"].get<double>() - joint["intact"]["loss"].get<double>());
  const nlohmann::json each = ablate_json("--run " + run + " --mode mean" + what);
  CHECK(each["components"] == 3);
  CHECK(each["intact"] == joint["intact"]);
  for (const auto& r : each["rows"]) CHECK(r["loss"] != row["loss"]);
  const auto table = run_attnlab("ablate --run " + run + " --together" + what);
  REQUIRE(table.code == 0);
  CHECK_THAT(table.out, Contains(", 1 of 1 components\n") && Contains("\nblocks.1.attn.h0 + blocks.1.attn.h1 + blocks.0.mlp "));
}

TEST_CASE("ablate refuses bad input with one line and exit 2, writing nothing", "[cli][ablate]") {
  TempDir dir("ablate-errors");
  const std::string run = dir / "run", csv = dir / "out.csv";
  REQUIRE(run_attnlab("train" + std::string(kTiny) + " --run " + run).code == 0);
  const std::pair<std::string, std::string> cases[] = {
      {"--what blocks.2.attn.h0",
       "attnlab ablate: no component named 'blocks.2.attn.h0' (this model has blocks.0-1, heads h0-h1 in attn, mlp)\n"},
      {"--mode half", "attnlab ablate: --mode must be one of mean, resample, zero, got 'half'\n"},
      {"--top 0", "attnlab ablate: --top must be >= 1, got 0\n"},
      {"--heldout 0", "attnlab ablate: --heldout must be >= 1, got 0\n"},
      {"--what blocks.0,,blocks.1", "attnlab ablate: --what has an empty component name in 'blocks.0,,blocks.1'\n"},
      {"--together --mode mean", "attnlab ablate: --together needs --what: the components to knock out at the same time\n"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run_attnlab("ablate --run " + run + " " + args + " --csv " + csv);
    INFO(args);
    CHECK(r.code == 2);
    CHECK(r.out == message);
    CHECK_FALSE(fs::exists(csv));
  }
  const std::string empty = dir / "empty";
  fs::create_directories(empty);
  fs::copy_file(run + "/config.ini", empty + "/config.ini");
  const auto r = run_attnlab("ablate --run " + empty + " --csv " + csv);
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, StartsWith("attnlab ablate: ") && Contains("checkpoint"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(csv));
}
