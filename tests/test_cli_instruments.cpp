// End-to-end tests of the instruments through the attnlab executable:
// probes observe without changing training, gradcheck passes on the three
// models and fails on a wrong gradient, attention writes one row-stochastic
// map per layer and head.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "framework/io/csv.h"
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

TEST_CASE("a probed seq2seq run labels its residual stream encoder first, each stack from its embeddings",
          "[cli][probe]") {
  TempDir dir("stream_labels");
  Result r = run_attnlab(std::string("train --task reverse --model seq2seq") + kSmall +
                         " --steps 1 --eval-every 1 --probe-every 1 --run " + (dir / "run"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const attnlab::CsvTable stream = attnlab::read_csv(dir / "run/probe_stream.csv", 1 << 20);
  REQUIRE(stream.columns.at(2) == "point");
  std::vector<std::string> points;
  for (const auto& row : stream.rows) points.push_back(row.at(2));
  CHECK(points == std::vector<std::string>{"enc.emb", "enc.block0", "enc.block1", "dec.emb", "dec.block0", "dec.block1"});
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

// ---- attention --out: the ownership rules of run directories -------------------

namespace {

std::string slurp_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Every entry under `dir` (not following symlinks) with its content.
std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    out[rel] = e.is_symlink() ? "-> " + fs::read_symlink(e.path()).string()
                              : e.is_regular_file() ? slurp_file(e.path().string()) : "<dir>";
  }
  return out;
}

size_t csv_count(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".csv";
  return n;
}

size_t lines_of(const std::string& out) { return static_cast<size_t>(std::count(out.begin(), out.end(), '\n')); }

// A trained encoder (2 layers x 2 heads) and seq2seq (6 x 2) under dir.
void train_small(const TempDir& dir) {
  for (const char* model : {"encoder", "seq2seq"}) {
    Result r = run_attnlab(std::string("train --task reverse --model ") + model + kSmall +
                           " --steps 3 --eval-every 3 --run " + (dir / model));
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
}

}  // namespace

TEST_CASE("attention --out refuses a directory of the user's, without the marker, and leaves it untouched",
          "[cli][attention][out]") {
  TempDir dir("attention-out-user");
  train_small(dir);
  const std::string mine = dir / "mine";
  fs::create_directories(mine);
  SECTION("their own attention.json") {
    spit_file(mine + "/attention.json", "{\"mine\": true}\n");
  }
  SECTION("any file") {
    spit_file(mine + "/notes.txt", "my notes\n");
  }
  SECTION("an older attnlab's maps, without the marker") {
    REQUIRE(run_attnlab("attention --run " + (dir / "encoder") + " --out " + mine + " \"1 2 3 4 5\"").code == 0);
    fs::remove(mine + "/.attnlab-attention");
  }
  const auto before = tree(mine);
  Result r = run_attnlab("attention --run " + (dir / "seq2seq") + " --out " + mine + " \"5 4 3 2 1\"");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(lines_of(r.out) == 1);
  CHECK(r.out.find("'" + mine + "'") != std::string::npos);
  CHECK(r.out.find("not attnlab's") != std::string::npos);
  CHECK(tree(mine) == before);
}

TEST_CASE("attention --out refuses a symlink as the directory or as one of its files, and follows neither",
          "[cli][attention][out]") {
  TempDir dir("attention-out-link");
  train_small(dir);
  const std::string target = dir / "target";
  std::string link = dir / "link";
  fs::create_directories(target);
  spit_file(target + "/keep.txt", "keep\n");
  SECTION("a symlink as DIR, to a directory with files") {
    fs::create_directory_symlink(target, link);
  }
  SECTION("a symlink as DIR, to an empty directory") {
    fs::remove(target + "/keep.txt");
    fs::create_directory_symlink(target, link);
  }
  SECTION("a symlink as DIR, named with a trailing slash") {
    fs::create_directory_symlink(target, link);
    link += "/";
  }
  SECTION("a symlink as DIR, to attnlab's own output") {
    fs::remove(target + "/keep.txt");
    REQUIRE(run_attnlab("attention --run " + (dir / "encoder") + " --out " + target + " \"1 2 3 4 5\"").code == 0);
    fs::create_directory_symlink(target, link);
  }
  const auto before = tree(target);
  Result r = run_attnlab("attention --run " + (dir / "encoder") + " --out " + link + " \"5 4 3 2 1\"");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(lines_of(r.out) == 1);
  CHECK(r.out.find("symbolic link") != std::string::npos);
  CHECK(tree(target) == before);
  CHECK(fs::is_symlink(dir / "link"));
}

TEST_CASE("attention --out refuses a symlink inside its own directory named like one of its files",
          "[cli][attention][out]") {
  TempDir dir("attention-out-inner-link");
  train_small(dir);
  const std::string out = dir / "maps", elsewhere = dir / "elsewhere";
  REQUIRE(run_attnlab("attention --run " + (dir / "seq2seq") + " --out " + out + " \"1 2 3 4 5\"").code == 0);
  spit_file(elsewhere, "precious\n");
  std::string name;
  SECTION("attention.json") { name = "attention.json"; }
  SECTION("a map") { name = nlohmann::json::parse(slurp_file(out + "/attention.json"))["layers"][1]["files"][0]; }
  fs::remove(out + "/" + name);
  fs::create_symlink(elsewhere, out + "/" + name);
  const auto before = tree(out);
  Result r = run_attnlab("attention --run " + (dir / "seq2seq") + " --out " + out + " \"5 4 3 2 1\"");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(lines_of(r.out) == 1);  // refused before the model is run: no decoding note either
  CHECK(r.out.find(name + " is a symbolic link") != std::string::npos);
  CHECK(tree(out) == before);
  CHECK(slurp_file(elsewhere) == "precious\n");
}

TEST_CASE("attention --out creates a new nested directory, takes an empty one and replaces its own maps",
          "[cli][attention][out]") {
  TempDir dir("attention-out-own");
  train_small(dir);
  SECTION("a new nested directory is created and marked") {
    const std::string out = dir / "a/b/c";
    Result r = run_attnlab("attention --run " + (dir / "encoder") + " --out " + out + " \"1 2 3 4 5\"");
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(fs::exists(out + "/attention.json"));
    CHECK(fs::is_regular_file(out + "/.attnlab-attention"));
    CHECK(csv_count(out) == 4);
  }
  SECTION("an empty directory is taken and marked") {
    const std::string out = dir / "empty";
    fs::create_directories(out);
    Result r = run_attnlab("attention --run " + (dir / "encoder") + " --out " + out + " \"1 2 3 4 5\"");
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(fs::exists(out + "/attention.json"));
    CHECK(fs::is_regular_file(out + "/.attnlab-attention"));
  }
  SECTION("a second attention into its own directory replaces the maps; a user's plot there stays") {
    const std::string out = dir / "maps";
    REQUIRE(run_attnlab("attention --run " + (dir / "seq2seq") + " --out " + out + " \"1 2 3 4 5\"").code == 0);
    REQUIRE(csv_count(out) == 12);
    spit_file(out + "/attention.png", "a plot\n");  // what scripts/tools/plot_attention.py writes there
    Result r = run_attnlab("attention --run " + (dir / "encoder") + " --out " + out + " \"5 4 3 2 1\"");
    INFO(r.out);
    REQUIRE(r.code == 0);
    const auto meta = nlohmann::json::parse(slurp_file(out + "/attention.json"));
    CHECK(meta["model"] == "encoder");
    CHECK(meta["input"] == "5 4 3 2 1");
    CHECK(meta["layers"].size() == 2);
    CHECK(csv_count(out) == 4);  // the seq2seq run's other maps are gone with its attention.json
    CHECK(slurp_file(out + "/attention.png") == "a plot\n");
    size_t hidden = 0;
    for (const auto& e : fs::directory_iterator(out)) hidden += e.path().filename().string().rfind(".attention", 0) == 0;
    CHECK(hidden == 0);  // no stage left
  }
  SECTION("the default RUN/attention is attnlab's: a second call replaces it, train --overwrite removes it") {
    const std::string run = dir / "encoder";
    REQUIRE(run_attnlab("attention --run " + run + " \"1 2 3 4 5\"").code == 0);
    Result again = run_attnlab("attention --run " + run + " \"5 4 3 2 1\"");
    INFO(again.out);
    REQUIRE(again.code == 0);
    CHECK(nlohmann::json::parse(slurp_file(run + "/attention/attention.json"))["input"] == "5 4 3 2 1");
    Result over = run_attnlab(std::string("train --task reverse --model encoder") + kSmall +
                              " --steps 3 --eval-every 3 --overwrite --run " + run);
    INFO(over.out);
    REQUIRE(over.code == 0);
    CHECK_FALSE(fs::exists(run + "/attention"));
  }
}

TEST_CASE("attention --out never writes into the working directory or its parents", "[cli][attention][out]") {
  TempDir dir("attention-out-protected");
  train_small(dir);
  const std::string cwd = dir / "work/here";
  fs::create_directories(cwd);
  for (const char* out : {".", "..", "./"}) {
    Result r = run_attnlab("attention --run " + (dir / "encoder") + " --out " + out + " \"1 2 3 4 5\"",
                           "cd '" + cwd + "' &&");
    INFO(out << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(lines_of(r.out) == 1);
    CHECK(r.out.find("working directory") != std::string::npos);
  }
  CHECK(fs::is_empty(cwd));
  CHECK(tree(dir / "work") == std::map<std::string, std::string>{{"here", "<dir>"}});
}

TEST_CASE("train --report writes the run's page at the end, attnlab's own: a resume replaces it, --overwrite of the "
          "run counts it as the run's, a user's report.html is kept with a note", "[cli][report]") {
  TempDir dir("train-report");
  const std::string run = dir / "run";
  Result r = run_attnlab(std::string("train") + kSmall + " --steps 4 --eval-every 2 --probe-every 2 --report --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::string page = slurp_file(run + "/report.html");
  CHECK(page.find("<meta name=\"generator\" content=\"attnlab report\">") != std::string::npos);
  CHECK(page.find("src=\"http") == std::string::npos);  // the browser test checks the network itself
  CHECK(page.find("href=\"http") == std::string::npos);
  const auto size_before = std::filesystem::file_size(run + "/report.html");

  r = run_attnlab("train --resume " + run + " --steps 6 --quiet");  // --report is in config.ini: kept on resume
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(slurp_file(run + "/report.html").find("attnlab report") != std::string::npos);
  CHECK(std::filesystem::file_size(run + "/report.html") != size_before);  // two more steps drawn

  r = run_attnlab(std::string("train") + kSmall + " --steps 2 --eval-every 2 --overwrite --run " + run);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_FALSE(std::filesystem::exists(run + "/report.html"));  // removed with the run's files, not written again

  const std::string mine = dir / "mine";
  REQUIRE(run_attnlab(std::string("train") + kSmall + " --steps 2 --eval-every 2 --run " + mine).code == 0);
  { std::ofstream(mine + "/report.html") << "my notes\n"; }
  r = run_attnlab("train --resume " + mine + " --steps 4 --report");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("note: the report was not written: --out refuses to write") != std::string::npos);
  CHECK(slurp_file(mine + "/report.html") == "my notes\n");
}
