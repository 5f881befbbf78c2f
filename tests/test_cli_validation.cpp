// The CLI's refusals of bad input (exit 2, one line, nothing written) and the
// input it must accept; issue 12, items 4, 5, 9 and 11 (--d-k), --version and --help.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "framework/io/checkpoint.h"
#include "models/sequence_model.h"

namespace fs = std::filesystem;
using attnlab::testing::read_summary;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;

namespace {

const std::string kTiny = " --d-model 16 --heads 2 --layers 1 --d-ff 32 --batch-size 8 --heldout 20 --threads 1 --quiet";

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

size_t count_lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

// `attnlab ARGS` run inside `dir`, so that whatever it writes by default (runs/...) lands there.
Result run_in(const TempDir& dir, const std::string& args) { return run_attnlab(args, "cd '" + dir.path.string() + "' &&"); }

bool is_empty_dir(const TempDir& dir) { return fs::is_empty(dir.path); }

// A refusal as the project promises it: exit 2, one line that holds `needle`.
void require_refused(const Result& r, const std::string& needle) {
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(count_lines(r.out) == 1);
  CHECK(r.out.find(needle) != std::string::npos);
}

// 40 distinct word pairs "a b -> b a" over 8 words: a small pairs file.
std::string small_pairs_file(const TempDir& dir) {
  const char* words[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
  std::string text;
  int n = 0;
  for (const char* x : words)
    for (const char* y : words)
      if (n < 40 && std::string(x) != y) text += std::string(x) + " " + y + "\t" + y + " " + x + "\n", ++n;
  return write_file(dir / "pairs.tsv", text);
}

}  // namespace

TEST_CASE("a stray positional word is refused, named, with the option it probably meant", "[cli][validation]") {
  TempDir dir("val-positional");
  // Before: `train sort` trained reverse into runs/reverse-encoder and `bench L` benchmarked S, both exit 0.
  Result train = run_in(dir, "train sort --steps 1");
  require_refused(train, "unexpected argument 'sort'");
  CHECK(train.out.find("did you mean --task sort?") != std::string::npos);
  CHECK(is_empty_dir(dir));

  Result bench = run_in(dir, "bench L --steps 1 --warmup 0 --no-peak");
  require_refused(bench, "unexpected argument 'L'");
  CHECK(bench.out.find("did you mean --config L?") != std::string::npos);

  require_refused(run_in(dir, "tasks extra"), "unexpected argument 'extra'");
  require_refused(run_in(dir, "eval --run somewhere extra"), "unexpected argument 'extra'");
  require_refused(run_in(dir, "gradcheck copy"), "did you mean --task copy?");
  // predict takes one input; a second one is named too (Boost said only "too many positional options").
  require_refused(run_in(dir, "predict --run somewhere \"1 2\" \"3 4\""), "unexpected argument '3 4'");
  CHECK(is_empty_dir(dir));
}

TEST_CASE("task and model options the run would ignore are refused when given on the command line",
          "[cli][validation]") {
  TempDir dir("val-applies");
  const std::string pairs = small_pairs_file(dir), held = write_file(dir / "held.tsv", "a b\tb a\n");
  const std::string run = dir / "run";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--task add --vocab 5", "--vocab applies to --task copy, reverse, sort, duplicate, induction, recall and repeat, not add"},
      {"--task add --min-len 3", "--min-len applies to"},
      {"--task add --max-len 9", "--max-len applies to"},
      {"--task copy --digits 2", "--digits applies to --task add, not copy"},
      {"--parameter-free-attention --heads 2", "--heads does not apply to --parameter-free-attention"},
      {"--task pairs --file " + pairs + " --heldout-file " + held + " --heldout 10 --model decoder",
       "--heldout applies to generated tasks, not pairs"},
      {"--task pairs --file " + pairs + " --heldout-file " + held + " --heldout-fraction 0.2 --model decoder",
       "--heldout-fraction does not apply with --heldout-file"},
  };
  for (const auto& [flags, message] : cases) {
    require_refused(run_attnlab("train " + flags + " --steps 1 --run " + run), message);
    CHECK_FALSE(fs::exists(run));
  }
  // A run's config.ini holds every option, the task's included: as --config it still works.
  Result resolved = run_attnlab("train --task add --check");
  REQUIRE(resolved.code == 0);
  REQUIRE(resolved.out.find("vocab = ") != std::string::npos);
  const std::string ini = write_file(dir / "add.ini", resolved.out);
  Result again = run_attnlab("train --config " + ini + " --check");
  INFO(again.out);
  CHECK(again.code == 0);
}

TEST_CASE("train --config refuses a directory, a device and a binary file instead of reading them as empty",
          "[cli][validation]") {
  TempDir dir("val-config");
  const std::string run = dir / "run";
  const std::string binary = write_file(dir / "weights.bin", std::string("steps = 5\n\0\x01\x02", 13));
  require_refused(run_attnlab("train --config " + dir.path.string() + " --run " + run), "': it is a directory, not an INI file");
  require_refused(run_attnlab("train --config /dev/zero --run " + run), "cannot read config file '/dev/zero': not a regular file");
  require_refused(run_attnlab("train --config " + binary + " --run " + run), "weights.bin': not a text INI file (byte 0 at offset 10)");
  CHECK_FALSE(fs::exists(run));
}

TEST_CASE("train refuses --momentum outside 0 <= m < 1, --heldout-fraction 0 and a held-out set of more than half the inputs",
          "[cli][validation]") {
  TempDir dir("val-ranges");
  const std::string run = dir / "run", pairs = small_pairs_file(dir);
  require_refused(run_attnlab("train --optimizer sgd --momentum 1 --run " + run), "--momentum must be in [0, 1), got 1");
  require_refused(run_attnlab("train --optimizer sgd --momentum 1.5 --run " + run), "--momentum must be in [0, 1), got 1.5");
  require_refused(run_attnlab("train --task pairs --file " + pairs + " --heldout-fraction 0 --model decoder --run " + run),
                  "--heldout-fraction must be in (0, 1), got 0");
  // 2^9 = 512 inputs: 300 held out would leave 212, fewer than are scored.
  require_refused(run_attnlab("train --vocab 2 --min-len 9 --max-len 9 --heldout 300 --run " + run),
                  "--heldout 300 is more than half of the 512 distinct inputs of task 'reverse', leaving 212 to train on");
  // 40 pairs: 0.6 holds out 24, leaving 16.
  require_refused(run_attnlab("train --task pairs --file " + pairs + " --heldout-fraction 0.6 --model decoder --run " + run),
                  "holds out 24 of the 40 distinct inputs");
  CHECK_FALSE(fs::exists(run));
  // Half exactly is still allowed.
  CHECK(run_attnlab("train --vocab 2 --min-len 9 --max-len 9 --heldout 256 --check").code == 0);
  CHECK(run_attnlab("train --optimizer sgd --momentum 0.9 --check").code == 0);
}

TEST_CASE("train refuses --init-std outside (0, inf) and beside a scheme other than gpt2, and records it",
          "[cli][validation]") {
  TempDir dir("val-init-std");
  const std::string run = dir / "run";
  require_refused(run_attnlab("train --init gpt2 --init-std -0.1 --run " + run), "--init-std must be finite and > 0, got -0.1");
  require_refused(run_attnlab("train --init gpt2 --init-std inf --run " + run), "--init-std must be finite and > 0, got inf");
  // auto is torch beside the default sinusoidal positions
  require_refused(run_attnlab("train --init-std 0.05 --run " + run),
                  "--init-std applies to --init gpt2, and this model's is torch (--init auto)");
  CHECK_FALSE(fs::exists(run));
  REQUIRE(run_attnlab("train --init gpt2 --init-std 0.05 --steps 1 --run " + run + kTiny).code == 0);
  CHECK(read_file(run + "/config.ini").find("\ninit-std = 0.05\n") != std::string::npos);
}

TEST_CASE("the encoder tagger takes copy, reverse and sort of variable length, and learns reverse", "[cli][validation]") {
  // Before: "outputs of up to 12 tokens for inputs of 4" (the longest output against the shortest input).
  for (const char* task : {"copy", "reverse", "sort"}) {
    Result r = run_attnlab(std::string("train --task ") + task + " --min-len 4 --max-len 12 --model encoder --check");
    INFO(task << ": " << r.out);
    CHECK(r.code == 0);
  }
  // duplicate's outputs really are longer than its inputs.
  require_refused(run_attnlab("train --task duplicate --min-len 4 --max-len 12 --model encoder --check"),
                  "outputs longer than their inputs");

  // Reversing inputs of 3 to 7 symbols: each output position depends on the input's own length.
  TempDir dir("val-tagger");
  const std::string run = dir / "reverse", untrained = dir / "untrained";
  const std::string flags = " --task reverse --vocab 6 --min-len 3 --max-len 7 --model encoder --d-model 32 --heads 2"
                            " --layers 2 --d-ff 64 --batch-size 32 --heldout 200 --lr 3e-3 --eval-every 100 --threads 1 --quiet";
  Result r = run_attnlab("train" + flags + " --steps 1500 --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(read_summary(run)["heldout_exact"].get<double>() >= 0.95);
  REQUIRE(run_attnlab("train" + flags + " --steps 1 --run " + untrained).code == 0);
  CHECK(read_summary(untrained)["heldout_exact"].get<double>() < 0.05);  // the check above can fail
  Result e = run_attnlab("eval --run " + run + " --len 3");
  INFO(e.out);
  CHECK(e.code == 0);
  Result p = run_attnlab("predict --run " + run + " \"5 0 4\"");
  INFO(p.out);
  CHECK(p.code == 0);
  CHECK(p.out.rfind("4 0 5\n", 0) == 0);
}

namespace {

// A two-step run of reverse (length 5) on the tiny model, checkpointed at step 2.
std::string tiny_reverse_run(const TempDir& dir, const std::string& extra = "") {
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train --task reverse --vocab 6 --min-len 5 --max-len 5" + kTiny + extra +
                      " --steps 2 --eval-every 2 --run " + run).code == 0);
  return run;
}

}  // namespace

TEST_CASE("eval, predict, attention, sample and resume refuse a config.ini that disagrees with the checkpoint",
          "[cli][validation]") {
  TempDir dir("val-mismatch");
  const std::string run = tiny_reverse_run(dir);
  REQUIRE(run_attnlab("eval --run " + run).code == 0);
  // heads 2 -> 1 keeps every weight's shape: the checkpoint loads, the answers change.
  std::string ini = read_file(run + "/config.ini");
  const size_t at = ini.find("heads = 2\n");
  REQUIRE(at != std::string::npos);
  ini.replace(at, 10, "heads = 1\n");
  write_file(run + "/config.ini", ini);
  const std::string metrics = read_file(run + "/metrics.csv");
  const std::string expected = "config.ini gives heads = 1, ";
  for (const std::string& command :
       {"eval --run " + run, "predict --run " + run + " \"1 2 3 4 5\"", "attention --run " + run + " --out " + (dir / "maps") +
                                                                             " \"1 2 3 4 5\"",
        "sample --run " + run, "train --resume " + run + " --steps 4"}) {
    Result r = run_attnlab(command);
    INFO(command);
    require_refused(r, expected);
    CHECK(r.out.find("the checkpoint was trained with 2") != std::string::npos);
    CHECK(r.out.find("step-00000002.safetensors: the checkpoint is of a different model") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir / "maps"));
  CHECK(read_file(run + "/metrics.csv") == metrics);  // the resume trained nothing
  CHECK(fs::exists(run + "/checkpoints/step-00000002.safetensors"));
  CHECK_FALSE(fs::exists(run + "/checkpoints/step-00000004.safetensors"));
}

TEST_CASE("a run written before --init and --random-positions existed loads as torch-initialised with plain positions, "
          "and a mismatch with --init is refused",
          "[cli][validation]") {
  TempDir dir("val-old-init");
  // An old run's weights are torch's; with learned positions today's default (auto) would be gpt2.
  const std::string run = tiny_reverse_run(dir, " --init torch --positional learned");
  // Make it an old run: neither line in config.ini, neither field in the checkpoint's model config.
  std::string ini = read_file(run + "/config.ini");
  for (const std::string line : {"init = torch\n", "random-positions = 0\n"}) {
    const size_t at = ini.find(line);
    REQUIRE(at != std::string::npos);
    ini.erase(at, line.size());
  }
  write_file(run + "/config.ini", ini);
  const std::string stem = run + "/checkpoints/step-00000002";
  attnlab::Metadata meta = attnlab::read_checkpoint_metadata(stem);
  nlohmann::json config = nlohmann::json::parse(meta.at("model_config"));
  auto model = attnlab::make_model(attnlab::TransformerConfig::from_json(config), 0);
  attnlab::load_checkpoint(stem, *model, nullptr);
  REQUIRE(config.erase("init") == 1);
  REQUIRE(config.erase("random_positions") == 1);
  meta["model_config"] = config.dump();
  attnlab::save_checkpoint(stem, *model, nullptr, meta);

  const Result loaded = run_attnlab("eval --run " + run);
  INFO(loaded.out);
  REQUIRE(loaded.code == 0);
  // A config.ini that says gpt2 does not describe these torch-initialised weights.
  write_file(run + "/config.ini", read_file(run + "/config.ini") + "init = gpt2\n");
  const Result refused = run_attnlab("eval --run " + run);
  require_refused(refused, "config.ini gives init = gpt2, the checkpoint was trained with torch");
  write_file(run + "/config.ini", ini);
  // A model config that from_json refuses is named as such, not compared field by field.
  config["random_positions"] = "many";
  meta["model_config"] = config.dump();
  attnlab::save_checkpoint(stem, *model, nullptr, meta);
  require_refused(run_attnlab("eval --run " + run),
                  "its model_config metadata is not a valid model (config field 'random_positions' must be an integer");
  config.erase("random_positions");
  meta["model_config"] = config.dump();
  attnlab::save_checkpoint(stem, *model, nullptr, meta);
  REQUIRE(run_attnlab("train --resume " + run + " --steps 4").code == 0);
}

TEST_CASE("a --d-k too large for memory is refused as bad input before a run directory is made", "[cli][validation]") {
  TempDir dir("val-dk");
  const std::string run = dir / "run";
  // Before: the estimate left d_k out, the model's allocation failed: exit 1, "out of memory", an empty run directory.
  require_refused(run_attnlab("train --d-k 100000000 --run " + run), "GiB of memory, this machine has");
  CHECK_FALSE(fs::exists(run));
  require_refused(run_attnlab("train --d-v 100000000 --run " + run), "GiB of memory");
  CHECK_FALSE(fs::exists(run));
}

TEST_CASE("attnlab --version names the version, build type, compiler and -march=native", "[cli][validation]") {
  Result r = run_attnlab("--version");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(std::regex_search(r.out, std::regex("^attnlab [0-9]+\\.[0-9]+\\.[0-9]+\n")));
  CHECK(std::regex_search(r.out, std::regex("\nbuild type: [A-Za-z]+\n")));
  CHECK(std::regex_search(r.out, std::regex("\ncompiler: (GCC|clang) [0-9]")));
  CHECK(std::regex_search(r.out, std::regex("\n-march=native: (yes|no)\n")));
  CHECK(run_attnlab("--help").out.find("--version") != std::string::npos);
}

TEST_CASE("every subcommand's --help shows its switches without an arg placeholder, and the switches still work",
          "[cli][validation]") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> switches = {
      {"train", {"overwrite", "quiet", "check", "tie-embeddings", "parameter-free-attention", "attention-only", "no-bias",
                 "nesterov", "decay-all"}},
      {"gradcheck", {"tie-embeddings", "parameter-free-attention", "attention-only", "no-bias"}},
      {"bench", {"no-peak"}},
      {"predict", {"logits"}},
  };
  for (const auto& [command, names] : switches) {
    Result r = run_attnlab(command + " --help");
    REQUIRE(r.code == 0);
    for (const std::string& name : names) {
      INFO(command << " --" << name << ":\n" << r.out);
      const std::regex line("\n *--" + name + " +[^ \n]");  // the name, then its help text
      const std::regex with_arg("\n *--" + name + " +(\\[=)?arg");
      CHECK(std::regex_search(r.out, line));
      CHECK_FALSE(std::regex_search(r.out, with_arg));
    }
  }
  // No command's help shows a switch with "arg (=false)" or "[=arg(=...)]".
  for (const char* command :
       {"train", "eval", "predict", "sample", "tasks", "bench", "gradcheck", "attention", "report", "hooks"}) {
    Result r = run_attnlab(std::string(command) + " --help");
    INFO(command << ":\n" << r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find("arg (=false)") == std::string::npos);
    CHECK(r.out.find("[=arg") == std::string::npos);
  }
  // A switch is on on the command line, and a file can set it either way.
  TempDir dir("val-switch");
  Result on = run_attnlab("train --tie-embeddings --check");
  CHECK(on.out.find("tie-embeddings = true") != std::string::npos);
  const std::string ini = write_file(dir / "sw.ini", "tie-embeddings = true\nnesterov = false\n");
  Result file = run_attnlab("train --config " + ini + " --check");
  INFO(file.out);
  CHECK(file.code == 0);
  CHECK(file.out.find("tie-embeddings = true") != std::string::npos);
  CHECK(file.out.find("nesterov = false") != std::string::npos);
}

TEST_CASE("a config file that starts with a byte-order mark reads as one without: --config and a run's config.ini",
          "[cli][validation]") {
  TempDir dir("validation-bom");
  const std::string bom = "\xEF\xBB\xBF";
  std::ofstream(dir / "bom.ini") << bom << "task = copy\nsteps = 3\n";
  const Result check = run_attnlab("train --check --config " + (dir / "bom.ini"));
  INFO(check.out);
  CHECK(check.code == 0);
  CHECK(check.out.find("task = copy\n") != std::string::npos);
  CHECK(check.out.find("steps = 3\n") != std::string::npos);

  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kTiny + " --task reverse --steps 2 --eval-every 2 --run " + run).code == 0);
  std::ifstream in(run + "/config.ini");
  const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(run + "/config.ini") << bom << config;
  const Result eval = run_attnlab("eval --run " + run);
  INFO(eval.out);
  CHECK(eval.code == 0);
}
