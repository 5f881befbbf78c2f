// End-to-end runs of the tasks read from files (pairs, text) and of the
// attention probes (induction, recall): train, eval, predict and sample read
// the run's saved vocabulary, and bad files get one line naming file and line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_harness.h"
#include "tests/fixtures.h"

namespace fs = std::filesystem;
using attnlab::testing::read_summary;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;

namespace {

std::string write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const char* kTinyModel = " --d-model 32 --heads 2 --layers 1 --d-ff 64 --quiet --threads 1";

using attnlab::testing::reverse_word_pairs;

}  // namespace

TEST_CASE("pairs: train, eval and predict a decoder, later commands map words with the saved vocabulary", "[cli][data]") {
  TempDir dir("data-pairs");
  const std::string file = write(dir / "rev.tsv", reverse_word_pairs());
  const std::string run = dir / "run";
  Result r = run_attnlab("train --task pairs --file " + file + " --model decoder --steps 20 --eval-every 10 --run " + run +
                         kTinyModel);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(fs::exists(run + "/vocab.txt"));
  CHECK(read_summary(run)["heldout_examples"].get<int64_t>() == 13);  // round(0.1 x 125)

  Result e = run_attnlab("eval --run " + run + " --examples 2");
  INFO(e.out);
  REQUIRE(e.code == 0);
  CHECK(e.out.find("13 held-out pairs of " + file) != std::string::npos);
  CHECK(e.out.find("exact match") != std::string::npos);

  Result before = run_attnlab("predict --run " + run + " \"a b c\"");
  INFO(before.out);
  REQUIRE(before.code == 0);
  CHECK((before.out.find("(correct)") != std::string::npos || before.out.find("(expected c b a)") != std::string::npos));

  // A changed file would number its words differently; the run keeps its own.
  write(file, "e d\td e\n" + reverse_word_pairs());
  Result after = run_attnlab("predict --run " + run + " \"a b c\"");
  CHECK(after.code == 0);
  CHECK(after.out.substr(0, after.out.find('\n')) == before.out.substr(0, before.out.find('\n')));

  Result unknown = run_attnlab("predict --run " + run + " \"a q c\"");
  INFO(unknown.out);
  CHECK(unknown.code == 2);
  CHECK(unknown.out.find("unknown token 'q'") != std::string::npos);
  CHECK(std::count(unknown.out.begin(), unknown.out.end(), '\n') == 1);

  Result not_lm = run_attnlab("sample --run " + run);
  CHECK(not_lm.code == 2);
  CHECK(not_lm.out.find("not a language model") != std::string::npos);
}

TEST_CASE("pairs: a seq2seq model learns a small file to full held-out exact match", "[cli][data][e2e]") {
  TempDir dir("data-pairs-learn");
  const std::string file = write(dir / "rev.tsv", reverse_word_pairs());
  const std::string run = dir / "run";
  Result r = run_attnlab("train --task pairs --file " + file + " --model seq2seq --steps 600 --lr 3e-3 --eval-every 50 --run " +
                         run + kTinyModel + " --batch-size 32");  // 600 steps: a few seconds
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(read_summary(run)["heldout_exact"].get<double>() == 1.0);
  // One step of training is far from it: the check above can fail.
  const std::string untrained = dir / "untrained";
  REQUIRE(run_attnlab("train --task pairs --file " + file + " --model seq2seq --steps 1 --run " + untrained + kTinyModel).code == 0);
  CHECK(read_summary(untrained)["heldout_exact"].get<double>() < 0.2);
}

TEST_CASE("text: a character model trains, reports bits per character and samples reproducibly", "[cli][data]") {
  TempDir dir("data-text");
  std::string body;
  for (int i = 0; i < 60; ++i) body += "the cat sat on the mat number " + std::to_string(i % 7) + ".\n";
  const std::string file = write(dir / "t.txt", body);
  const std::string run = dir / "run";
  Result r = run_attnlab("train --task text --file " + file + " --model decoder --seq-len 24 --steps 30 --eval-every 15 --run " +
                         run + kTinyModel);
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto s = read_summary(run);
  const double bpc = s["heldout_bits_per_char"].get<double>();
  CHECK(bpc > 0);
  CHECK(s["heldout_chars"].get<int64_t>() == static_cast<int64_t>(body.size() / 10));

  Result e = run_attnlab("eval --run " + run);
  INFO(e.out);
  REQUIRE(e.code == 0);
  CHECK(e.out.find("bits per character") != std::string::npos);
  Result encoder = run_attnlab("train --task text --file " + file + " --model encoder --run " + (dir / "enc"));
  CHECK(encoder.code == 2);
  CHECK(encoder.out.find("--model decoder") != std::string::npos);

  const std::string sample = "sample --run " + run + " --prompt \"the \" --tokens 40 --temperature 0.8 --top-k 5";
  Result a = run_attnlab(sample + " --seed 1"), b = run_attnlab(sample + " --seed 1"), c = run_attnlab(sample + " --seed 2");
  INFO(a.out);
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  CHECK(a.out != c.out);
  CHECK(a.out.rfind("the ", 0) == 0);
  CHECK(a.out.size() == 4 + 40 + 1);  // the prompt, 40 generated characters (ASCII: one byte each), a newline

  // The run keeps its vocabulary: sampling works without the text file; evaluating says what is missing.
  fs::remove(file);
  Result orphan = run_attnlab(sample + " --seed 1");
  CHECK(orphan.code == 0);
  CHECK(orphan.out == a.out);
  Result gone = run_attnlab("eval --run " + run);
  CHECK(gone.code == 2);
  CHECK(gone.out.find("cannot read '" + file + "'") != std::string::npos);

  Result unknown = run_attnlab("sample --run " + run + " --prompt \"the dog\"");
  CHECK(unknown.code == 2);
  CHECK(unknown.out.find("unknown token 'd'") != std::string::npos);
  Result predict = run_attnlab("predict --run " + run + " \"the\"");
  CHECK(predict.code == 2);
  CHECK(predict.out.find("attnlab sample") != std::string::npos);
}

TEST_CASE("induction and recall train end to end with a decoder", "[cli][data]") {
  TempDir dir("data-probes");
  for (const std::string task : {"induction", "recall"}) {
    const std::string run = dir / task;
    Result r = run_attnlab("train --task " + task + " --vocab 12 --min-len 5 --max-len 6 --model decoder --steps 20 " +
                           "--eval-every 10 --heldout 50 --run " + run + kTinyModel);
    INFO(task << ": " << r.out);
    REQUIRE(r.code == 0);
    CHECK(read_summary(run)["heldout_examples"].get<int64_t>() == 50);
    Result p = run_attnlab("predict --run " + run + (task == "induction" ? " \"5 2 8 1 9 3 8\"" : " \"0 6 1 7 2 8 1\""));
    INFO(p.out);
    CHECK(p.code == 0);
  }
}

TEST_CASE("bad data files get one line naming the file and line, exit code 2 and no run", "[cli][data][errors]") {
  TempDir dir("data-bad");
  const std::string run = dir / "never";
  const std::string missing = dir / "missing.tsv";
  const std::string empty = write(dir / "empty.tsv", "");
  const std::string no_tab = write(dir / "notab.tsv", "a b\tb a\na b c\n");
  std::string long_lines;
  for (int i = 0; i < 5; ++i) long_lines += "x\tx\n";
  long_lines += std::string("x x x x x x x x x x\tx\n");
  const std::string too_long = write(dir / "long.tsv", long_lines);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--task pairs --file " + missing, "cannot read '" + missing + "'"},
      {"--task text --file " + missing, "cannot read '" + missing + "'"},
      {"--task pairs --file " + empty, empty + ": the file is empty"},
      {"--task pairs --file " + no_tab, no_tab + " line 2: no tab between input and output"},
      {"--task pairs --file " + too_long + " --model decoder --positions 8", "longest input: " + too_long + " line 6"},
      {"--task pairs", "--file PATH"},
      {"--task pairs --file " + no_tab + " --tokenize bytes", "tokenize"},
  };
  for (const auto& [args, expected] : cases) {
    Result r = run_attnlab("train " + args + " --run " + run);
    INFO(args << " -> " << r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find(expected) != std::string::npos);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(run));
  }
}
