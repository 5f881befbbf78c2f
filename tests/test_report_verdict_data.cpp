// What `attnlab report`'s verdicts and notes stand on: a language model's
// unigram and bigram baselines, metrics.csv's dropped last line, and the
// record of the options the user gave (given_options.ini).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "datasets/text_baselines.h"
#include "framework/error.h"
#include "framework/io/csv.h"
#include "tests/cli_harness.h"

using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;

namespace {

const std::string kSmall =
    " --task reverse --vocab 6 --min-len 5 --max-len 5 --d-model 16 --heads 2 --layers 1 --d-ff 32"
    " --batch-size 8 --heldout 20 --steps 4 --eval-every 2 --threads 1 --quiet";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The "name = value" lines of an INI file (comments skipped).
std::map<std::string, std::string> ini(const std::string& path) {
  std::map<std::string, std::string> out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out[line.substr(0, line.find(" = "))] = line.substr(line.find(" = ") + 3);
  return out;
}

}  // namespace

TEST_CASE("text baselines: add-one unigram and bigram bits per held-out character, worked by hand") {
  // Training "abab": unigram counts a 2, b 2 of 4, V = 2: P(a) = P(b) = 3/6, 1 bit each.
  // Bigram contexts a 2 (ab twice), b 1 (ba): P(a | b) = (1 + 1) / (1 + 2), P(b | a) = (2 + 1) / (2 + 2);
  // held-out "ab", its a after the last training b: -(log2 2/3 + log2 3/4) / 2 = 0.5 bits.
  const attnlab::TextBaselines b = attnlab::text_baselines({0, 1, 0, 1}, {0, 1}, 2);
  CHECK(b.unigram_bits_per_char == Approx(1.0).epsilon(1e-12));
  CHECK(b.bigram_bits_per_char == Approx(0.5).epsilon(1e-12));
  CHECK(b.heldout_chars == 2);
  // A character never trained on (c = 2) still costs finite bits: training "aab", V = 3, held out "ca".
  // Unigram: P(c) = 1/6, P(a) = 3/6: log2(12) / 2. Bigram: P(c | b) = 1/3, P(a | c) = 1/3: log2(3).
  const attnlab::TextBaselines unseen = attnlab::text_baselines({0, 0, 1}, {2, 0}, 3);
  CHECK(unseen.unigram_bits_per_char == Approx(std::log2(12.0) / 2).epsilon(1e-12));
  CHECK(unseen.bigram_bits_per_char == Approx(std::log2(3.0)).epsilon(1e-12));
}

TEST_CASE("text baselines refuse an empty part or an id outside the vocabulary") {
  CHECK_THROWS_WITH(attnlab::text_baselines({}, {0}, 2), "text baselines: the training text is empty");
  CHECK_THROWS_WITH(attnlab::text_baselines({0, 5}, {0}, 2),
                    "text baselines: token id 5 of the training text is outside the vocabulary of 2");
  CHECK_THROWS_AS(attnlab::text_baselines({0}, {}, 2), attnlab::ValueError);
}

TEST_CASE("read_csv says when it left out an unterminated last line") {
  TempDir dir("csv-dropped-line");
  write(dir / "whole.csv", "step,loss\n5,2.5\n10,2.0\n");
  write(dir / "cut.csv", "step,loss\n5,2.5\n10,2.0\n15,1.");
  write(dir / "crlf.csv", "step,loss\r\n5,2.5\r\n");
  const attnlab::CsvTable whole = attnlab::read_csv(dir / "whole.csv", 1 << 20);
  CHECK(whole.rows.size() == 2);
  CHECK_FALSE(whole.dropped_last_line);
  const attnlab::CsvTable cut = attnlab::read_csv(dir / "cut.csv", 1 << 20);
  CHECK(cut.rows.size() == 2);
  CHECK(cut.rows.back() == std::vector<std::string>{"10", "2.0"});
  CHECK(cut.dropped_last_line);
  CHECK_FALSE(attnlab::read_csv(dir / "crlf.csv", 1 << 20).dropped_last_line);
}

TEST_CASE("train records the options given on the command line in given_options.ini, config.ini unchanged") {
  TempDir dir("given-options");
  const auto r = run_attnlab("train" + kSmall + " --seed 3 --run " + (dir / "a"));
  REQUIRE(r.code == 0);
  const auto given = ini(dir / "a/given_options.ini");
  const std::map<std::string, std::string> want = {
      {"task", "reverse"}, {"vocab", "6"},      {"min-len", "5"}, {"max-len", "5"},    {"d-model", "16"},
      {"heads", "2"},      {"layers", "1"},     {"d-ff", "32"},   {"batch-size", "8"}, {"heldout", "20"},
      {"steps", "4"},      {"eval-every", "2"}, {"threads", "1"}, {"seed", "3"}};
  CHECK(given == want);  // not --run or --quiet (not settings), not init or positions (resolved)
  const auto config = ini(dir / "a/config.ini");
  for (const auto& [name, value] : given) CHECK(config.at(name) == value);
  CHECK(config.count("init") == 1);
  // config.ini: its header comment, then the resolved options, as --check prints them.
  const std::string text = slurp(dir / "a/config.ini");
  const auto check = run_attnlab("train" + kSmall + " --seed 3 --check");
  REQUIRE(check.code == 0);
  CHECK(text.substr(text.find('\n') + 1) == check.out);
}

TEST_CASE("with --config every option of the file counts as given and the repeated run is the same bits") {
  TempDir dir("given-config");
  REQUIRE(run_attnlab("train" + kSmall + " --run " + (dir / "a")).code == 0);
  REQUIRE(run_attnlab("train --config " + (dir / "a/config.ini") + " --quiet --run " + (dir / "b")).code == 0);
  attnlab::testing::require_same_run(dir / "a", dir / "b", 4);
  CHECK(ini(dir / "b/given_options.ini") == ini(dir / "a/config.ini"));
  CHECK(ini(dir / "b/config.ini") == ini(dir / "a/config.ini"));
  // A resumed run keeps the record of the run it continues.
  const std::string before = slurp(dir / "a/given_options.ini");
  REQUIRE(run_attnlab("train --resume " + (dir / "a") + " --steps 6 --quiet").code == 0);
  CHECK(slurp(dir / "a/given_options.ini") == before);
  // --check writes nothing.
  REQUIRE(run_attnlab("train" + kSmall + " --check --run " + (dir / "c")).code == 0);
  CHECK_FALSE(std::filesystem::exists(dir / "c"));
}
