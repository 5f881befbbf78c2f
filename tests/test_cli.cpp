// End-to-end tests of the attnlab executable: training solves small tasks,
// resuming is bitwise exact, and bad input gets one line, exit code 2 and no
// files.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::read_summary;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;

namespace {

const char* kTiny = " --vocab 6 --min-len 5 --max-len 5 --d-model 32 --heads 2 --layers 1 --d-ff 64 --batch-size 32"
                    " --heldout 200 --quiet";  // --threads defaults to 1

}  // namespace

TEST_CASE("train solves copy and reverse with a tiny encoder, an untrained model does not", "[cli][e2e]") {
  TempDir dir("solve");
  for (const char* task : {"copy", "reverse"}) {
    std::string run = dir / task;
    Result r = run_attnlab(std::string("train --task ") + task + kTiny + " --steps 600 --lr 3e-3 --eval-every 50 --run " + run);
    INFO(r.out);
    REQUIRE(r.code == 0);
    auto s = read_summary(run);
    CHECK(s["heldout_exact"].get<double>() == 1.0);
    CHECK(s["solved_at_step"].get<int64_t>() > 0);

    // The same architecture after a single step of training is far from solving it:
    // the metric the previous check relied on can fail.
    std::string untrained = dir / (std::string(task) + "-untrained");
    r = run_attnlab(std::string("train --task ") + task + kTiny + " --steps 1 --run " + untrained);
    REQUIRE(r.code == 0);
    CHECK(read_summary(untrained)["heldout_exact"].get<double>() < 0.05);
  }
}

TEST_CASE("eval and predict read a trained run", "[cli][e2e]") {
  TempDir dir("evalpredict");
  std::string run = dir / "rev";
  REQUIRE(run_attnlab(std::string("train --task reverse") + kTiny + " --steps 600 --lr 3e-3 --eval-every 50 --run " + run).code == 0);
  Result e = run_attnlab("eval --run " + run);
  INFO(e.out);
  REQUIRE(e.code == 0);
  CHECK(e.out.find("exact match     100.00%") != std::string::npos);
  Result p = run_attnlab("predict --run " + run + " \"0 1 2 3 4\"");
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK(p.out.rfind("4 3 2 1 0\n(correct)", 0) == 0);
  CHECK(p.out.find("note:") == std::string::npos);
  // A length the model never saw: still answered (exit 0), with a note that names the trained lengths.
  Result short_input = run_attnlab("predict --run " + run + " \"0 1 2\"");
  INFO(short_input.out);
  REQUIRE(short_input.code == 0);
  CHECK(short_input.out.find("note: this model was trained on inputs of 5 symbols (--min-len 5 --max-len 5); "
                             "this one has 3") != std::string::npos);
}

TEST_CASE("a run stopped at 200 steps and resumed to 400 ends with the same weights as 400 steps at once", "[cli][e2e]") {
  TempDir dir("resume");
  // --target 0: never stop early; dropout on, so its generator state must be restored too.
  std::string common = std::string(" --task reverse") + kTiny + " --target 0 --dropout 0.1 --eval-every 100";
  std::string whole = dir / "whole", split = dir / "split";
  REQUIRE(run_attnlab("train" + common + " --steps 400 --run " + whole).code == 0);
  REQUIRE(run_attnlab("train" + common + " --steps 200 --run " + split).code == 0);
  Result r = run_attnlab("train --resume " + split + " --steps 400 --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(attnlab::testing::checkpoint_difference(whole + "/checkpoints/step-00000400.safetensors",
                                                  split + "/checkpoints/step-00000400.safetensors") == "");
  // The metrics of the resumed run continue where the first part stopped.
  std::ifstream metrics(split + "/metrics.csv");
  std::string line, last;
  int rows = 0;
  while (std::getline(metrics, line)) { ++rows; last = line; }
  CHECK(rows == 1 + 400 / 50);  // --log-every 50 (the default)
  CHECK(last.rfind("400,", 0) == 0);
}

TEST_CASE("two runs with the same seed and thread count end bitwise identical, with 2 threads too", "[cli][e2e]") {
  TempDir dir("determinism");
  for (const char* threads : {"1", "2"}) {
    std::string common = std::string(" --task sort --model decoder") + kTiny + " --target 0 --dropout 0.1 --steps 60" +
                         " --eval-every 60 --threads " + threads + " --run ";
    std::string a = dir / (std::string("a") + threads), b = dir / (std::string("b") + threads);
    REQUIRE(run_attnlab("train" + common + a).code == 0);
    REQUIRE(run_attnlab("train" + common + b).code == 0);
    INFO(threads << " threads");
    REQUIRE(attnlab::testing::checkpoint_difference(a + "/checkpoints/step-00000060.safetensors",
                                                    b + "/checkpoints/step-00000060.safetensors") == "");
  }
}

TEST_CASE("bad input gets one line on stderr, exit code 2 and no files", "[cli][errors]") {
  TempDir dir("bad");
  std::string run = dir / "never";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --bogus-flag", "unrecognised option"},
      {"train --task nosuchtask", "nosuchtask"},
      {"train --d-model 0", "--d-model"},
      {"train --batch-size -3", "--batch-size"},
      {"train --heads 3 --d-model 64", "--heads 3"},
      {"train --min-len 40 --max-len 40 --positions 32", "--positions"},
      {"train --lr -1", "lr"},
      {"train --steps abc", "steps"},
      {"nosuchcommand", "unknown command"},
  };
  for (const auto& [args, expected] : cases) {
    Result r = run_attnlab(args + " --run " + run);
    INFO(args << " -> " << r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find(expected) != std::string::npos);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(run));
  }
  Result missing = run_attnlab("eval --run " + dir / "missing");
  CHECK(missing.code == 2);
  CHECK(missing.out.find("does not exist") != std::string::npos);
  fs::create_directories(dir / "foreign");
  Result foreign = run_attnlab("predict --run " + dir / "foreign" + " \"1 2\"");
  CHECK(foreign.code == 2);
  CHECK(foreign.out.find("not an attnlab run directory") != std::string::npos);
}

TEST_CASE("bench prints one JSON line with the documented keys, a fixed graph size per block, and the same loss twice",
          "[cli][bench]") {
  // The graph config (width 4, two tokens) keeps this fast. A pre-LN block
  // records 11 nodes (layer norm, q, k, v, fused attention, output map, add;
  // layer norm, linear_relu, linear, add) and the model 6 around the blocks
  // (embedding, the positional table as a constant, their sum, final norm,
  // logits, loss): 6 + 11 x 6 layers.
  // A regression that splits a fused op into several changes this count.
  const std::string args = "bench --config graph --steps 30 --warmup 2 --no-peak";
  Result a = run_attnlab(args), b = run_attnlab(args);
  INFO(a.out << b.out);
  REQUIRE(a.code == 0);
  REQUIRE(b.code == 0);
  REQUIRE(std::count(a.out.begin(), a.out.end(), '\n') == 1);
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  for (const char* key : {"impl", "config", "threads", "steps", "step_ms", "tokens_per_s", "params", "gflops",
                          "final_loss", "peak_rss_mib", "nodes_per_step"})
    CHECK(ja.contains(key));
  CHECK_FALSE(ja.contains("mfu"));  // --no-peak: no peak, no MFU
  CHECK(ja["config"] == "graph");
  CHECK(ja["steps"] == 30);
  // 11 per block: the fused Q/K/V projection is 3 nodes (two concats, one linear), which the
  // attention kernel reads unsplit.
  CHECK(ja["nodes_per_step"] == 6 + 11 * 6);
  CHECK(ja["step_ms"].get<double>() > 0);
  // Same seed and threads: the same loss to the last bit.
  CHECK(ja["final_loss"].get<double>() == jb["final_loss"].get<double>());
}

TEST_CASE("bench without --steps times 200 steps of S, 20 of M and 2000 of graph: half a second or more even at two "
          "threads",
          "[cli][bench]") {
  // Fewer steps (20 of S took 55 ms at two threads) let a process starting beside the run, a
  // reader of its output, set the median (docs/benchmark.md). L's 5 take seconds already.
  for (const auto& [config, steps] : {std::pair<std::string, int>{"S", 200}, {"M", 20}, {"graph", 2000}}) {
    const Result r = run_attnlab("bench --config " + config + " --warmup 0 --no-peak");
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(nlohmann::json::parse(r.out.substr(0, r.out.find('\n')))["steps"] == steps);
  }
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("every subcommand's --help fits in 80 columns, long example commands broken as shell continuations",
          "[cli][help]") {
  for (const std::string command : {"train", "eval", "predict", "sample", "tasks", "bench", "gradcheck", "attention", "report",
                                    "hooks"}) {
    const Result r = run_attnlab(command + " --help");
    INFO(command << " --help:\n" << r.out);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("usage: attnlab " + command) == 0);
    for (const std::string& line : lines_of(r.out)) {
      INFO(line.size() << " columns: " << line);
      CHECK(line.size() <= 80);
    }
  }
  const Result top = run_attnlab("--help");
  INFO("attnlab --help:\n" << top.out);
  REQUIRE(top.code == 0);
  for (const std::string& line : lines_of(top.out)) {
    INFO(line.size() << " columns: " << line);
    CHECK(line.size() <= 80);
  }
  // An example command too long for one line continues on the next with a backslash.
  const Result train = run_attnlab("train --help");
  CHECK(train.out.find("  attnlab train --task add --model decoder --layers 2 --steps 3000 \\\n      --run runs/add\n") !=
        std::string::npos);
}

TEST_CASE("train --help and bench --help list each choice's values from its table", "[cli][help][options]") {
  // Boost wraps the help column: compare with every run of white space made one space.
  const auto flat = [](const std::string& text) {
    std::string out;
    for (char c : text)
      if (!std::isspace(static_cast<unsigned char>(c))) out += c;
      else if (!out.empty() && out.back() != ' ') out += ' ';
    return out;
  };
  const std::string train = flat(run_attnlab("train --help").out), bench = flat(run_attnlab("bench --help").out);
  for (const std::string values :
       {"--optimizer arg (=adamw) sgd | adam | adamw", "--schedule arg (=constant) constant | linear | cosine | noam",
        "--activation arg (=relu) feed-forward activation: relu | gelu", "--positional arg (=sinusoidal) sinusoidal | "
        "learned | rope | none", "--norm arg (=pre) pre (pre-LN) | post (post-LN, as in Vaswani et al.)",
        "pairs: words (separated by spaces) | chars (every character a token)", "stop (keep the last checkpoint) | "
        "skip (the step); a non-finite weight always stops", "of the matrix products: fp32 | bf16 (operands rounded"}) {
    INFO(values);
    CHECK(train.find(values) != std::string::npos);
  }
  CHECK(bench.find("how several threads share a step: batch (each runs whole slices") != std::string::npos);
  CHECK(bench.find("| ops (every op is split among them)") != std::string::npos);
}

TEST_CASE("predict --top without --logits is refused with one line, exit 2", "[cli][errors]") {
  const Result r = run_attnlab("predict --run no-such-run --top 2 \"1 2 3\"");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out == "attnlab predict: --top 2 applies to --logits (tokens shown per position); add --logits\n");
}

TEST_CASE("attnlab tasks shows recall at the lengths train uses (train's defaults are its defaults)",
          "[cli][tasks]") {
  TempDir dir("tasks-recall");
  // The lengths and symbols of `train --check`, with the options given to both.
  for (const std::string flags : {" --vocab 20", " --vocab 20 --min-len 3 --max-len 5", " --vocab 24 --min-len 4 --max-len 6"}) {
    INFO("flags:" << flags);
    const Result tasks = run_attnlab("tasks" + flags);
    REQUIRE(tasks.code == 0);
    const Result check = run_attnlab("train --check --task recall" + flags);
    INFO(tasks.out << "\n" << check.out);
    REQUIRE(check.code == 0);
    auto value = [&](const std::string& key) {
      const size_t at = check.out.find("\n" + key + " = ");
      REQUIRE(at != std::string::npos);
      return std::stoll(check.out.substr(at + key.size() + 4));
    };
    const std::string lengths = "n = " + std::to_string(value("min-len")) + ".." + std::to_string(value("max-len"));
    const size_t recall = tasks.out.find("\nrecall: ");
    REQUIRE(recall != std::string::npos);
    CHECK(tasks.out.substr(recall, tasks.out.find('\n', recall + 1) - recall).find(lengths) != std::string::npos);
  }
  // train's default vocabulary is too small for recall's default lengths: tasks says which --vocab train needs.
  const Result plain = run_attnlab("tasks");
  CHECK(plain.out.find("(shown with --vocab 16: train refuses --vocab 10 with --max-len 8") != std::string::npos);
  const Result refused = run_attnlab("train --task recall --check");
  CHECK(refused.code == 2);
  CHECK(refused.out.find("expected vocab >= 16") != std::string::npos);
  // A task the options do not fit is named with train's refusal; the others are still listed.
  const Result short_inputs = run_attnlab("tasks --min-len 3 --max-len 5");
  INFO(short_inputs.out);
  CHECK(short_inputs.code == 0);
  CHECK(short_inputs.out.find("induction: attnlab train --task induction refuses these options: induction: min_len = 3") !=
        std::string::npos);
  CHECK(short_inputs.out.find("\nrecall: ") != std::string::npos);
}

TEST_CASE("predict and attention note an add input that is not of the trained shape, naming the shape",
          "[cli][add-shape]") {
  TempDir dir("add-shape");
  const std::string run = dir / "add";
  const Result trained = run_attnlab("train --task add --digits 3 --model decoder --d-model 16 --heads 2 --layers 1"
                                     " --d-ff 32 --batch-size 8 --heldout 8 --steps 2 --eval-every 2 --target 0"
                                     " --threads 1 --quiet --run " + run);
  INFO(trained.out);
  REQUIRE(trained.code == 0);
  const std::string shape = "trained on inputs of two 3-digit operands, 3 digits + 3 digits (--digits 3, e.g. 111+222)";
  for (const std::string input : {"999+1", "123456", "12+34", "1234+56"}) {
    INFO(input);
    const Result r = run_attnlab("predict --run " + run + " \"" + input + "\"");
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find("note: this model was " + shape + "; '" + input + "' is not of that shape") != std::string::npos);
  }
  const Result maps = run_attnlab("attention --run " + run + " --out " + (dir / "maps") + " \"12+34\"");
  CHECK(maps.out.find(shape) != std::string::npos);
  for (const std::string input : {"123+456", "109+900"}) {  // the digits 0 and 9 are digits
    const Result fine = run_attnlab("predict --run " + run + " \"" + input + "\"");
    INFO(fine.out);
    CHECK(fine.code == 0);
    CHECK(fine.out.find("not of that shape") == std::string::npos);
  }
}
