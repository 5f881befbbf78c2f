// Self-describing checkpoints: a model file's metadata names its task and
// options, vocabulary, special tokens, sequence layout and the attnlab
// version (training/checkpoints.h), for every model kind and for tasks read
// from files; and a file written without those keys (as before they existed)
// still resumes, evaluates and predicts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "framework/io/checkpoint.h"
#include "tests/cli_harness.h"
#include "training/checkpoints.h"

using namespace attnlab;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;
using nlohmann::json;

namespace {

TrainSettings tiny(const std::string& task, const std::string& arch, const std::string& file = "") {
  TrainSettings s = default_settings();
  s.task.name = task;
  s.task.file = file;
  s.task.vocab = 5;
  s.task.min_len = 3;
  s.task.max_len = 4;
  s.task.seq_len = 8;
  s.model.arch = parse_choice<Arch>("arch", arch);
  s.model.d_model = 16;
  s.model.n_heads = 2;
  s.model.n_layers = 1;
  s.model.d_ff = 32;
  s.heldout = 10;
  s.steps = 1;
  finalize(s);
  return s;
}

Metadata saved_metadata(const TrainSettings& s, const std::string& dir) {
  TrainState state(s);
  CheckpointStore store(dir);
  std::filesystem::create_directories(dir);
  store.save(state, 0, 3);
  return read_checkpoint_metadata(store.stem(0));
}

// CMakeLists.txt's project(attnlab VERSION x.y.z), the one place it is written.
std::string cmake_version() {
  std::ifstream in(std::string(ATTNLAB_TEST_DATA) + "/../../CMakeLists.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::smatch m;
  REQUIRE(std::regex_search(text, m, std::regex(R"(project\(attnlab VERSION ([0-9.]+))")));
  return m[1];
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("a model file's metadata holds the task, vocabulary, special tokens, layout and version for every model kind",
          "[checkpoint][describe]") {
  TempDir tmp("checkpoint-description");
  const std::string version = cmake_version();
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"encoder", "input -> answer"}, {"decoder", "[bos] input [sep] answer [eos]"}, {"seq2seq", "[bos] answer [eos]"}};
  for (const auto& [arch, layout] : kinds) {
    INFO(arch);
    const Metadata meta = saved_metadata(tiny("reverse", arch), tmp / arch);
    const json task = json::parse(meta.at("task"));
    CHECK(task.at("name") == "reverse");
    CHECK(task.at("vocab") == 5);
    CHECK(task.at("min_len") == 3);
    CHECK(task.at("max_len") == 4);
    const json vocab = json::parse(meta.at("vocabulary"));
    CHECK(vocab.at("tokens") == json::array({"<pad>", "<bos>", "<eos>", "<sep>", "0", "1", "2", "3", "4"}));
    CHECK(vocab.at("ids").at("3") == 7);
    CHECK(vocab.at("written") == "words");
    CHECK(json::parse(meta.at("special_tokens")) == json{{"<pad>", 0}, {"<bos>", 1}, {"<eos>", 2}, {"<sep>", 3}});
    CHECK(meta.at("sequence_layout").find(layout) != std::string::npos);
    CHECK(meta.at("attnlab_version") == version);
  }
  const Metadata add = saved_metadata(tiny("add", "decoder"), tmp / "add");
  CHECK(json::parse(add.at("vocabulary")).at("written") == "chars_ignoring_whitespace");
  CHECK(json::parse(add.at("vocabulary")).at("ids").at("+") == 14);
}

TEST_CASE("a model file of a task read from a file holds that file's vocabulary (pairs words, text characters)",
          "[checkpoint][describe]") {
  TempDir tmp("checkpoint-description-files");
  std::string pairs;
  for (const char* w : {"red", "green", "blue", "cyan", "gray", "pink", "teal", "lime", "navy", "plum", "rose", "sand"})
    pairs += std::string(w) + " one\t" + w + " two\n";
  write_text(tmp / "pairs.tsv", pairs);
  const json p = json::parse(saved_metadata(tiny("pairs", "seq2seq", tmp / "pairs.tsv"), tmp / "p").at("vocabulary"));
  CHECK(p.at("written") == "words");
  CHECK(p.at("tokens").at(4) == "red");
  CHECK(p.at("ids").at("two") == 6);  // "red one" then "red two": ids in order of first appearance
  std::string text;
  for (int i = 0; i < 40; ++i) text += "abcab cabba ";
  write_text(tmp / "text.txt", text);
  const Metadata t = saved_metadata(tiny("text", "decoder", tmp / "text.txt"), tmp / "t");
  const json tv = json::parse(t.at("vocabulary"));
  CHECK(tv.at("written") == "chars");
  CHECK(tv.at("tokens") == json::array({"<pad>", "<bos>", "<eos>", "<sep>", "a", "b", "c", " "}));
  CHECK(t.at("sequence_layout").find("predicts the next") != std::string::npos);
  CHECK(json::parse(t.at("task")).at("seq_len") == 8);
}

namespace {

// The keys a model file had before checkpoint_description() existed.
void strip_description(const std::string& stem, const TrainSettings& s) {
  TrainState state(s);
  Metadata meta = load_checkpoint(stem, state.model(), &state.optimizer());
  for (const char* key : {"task", "vocabulary", "special_tokens", "sequence_layout", "attnlab_version"})
    REQUIRE(meta.erase(key) == 1);
  save_checkpoint(stem, state.model(), &state.optimizer(), meta);
}

}  // namespace

TEST_CASE("a checkpoint written without the description keys still evaluates, predicts and resumes",
          "[checkpoint][describe][cli]") {
  TempDir tmp("checkpoint-old-format");
  const std::string run = tmp / "run";
  REQUIRE(run_attnlab("train --task reverse --vocab 5 --min-len 3 --max-len 4 --model decoder --d-model 16 --heads 2"
                      " --layers 1 --d-ff 32 --heldout 10 --steps 4 --eval-every 4 --quiet --run " + run)
              .code == 0);
  const auto eval_before = run_attnlab("eval --run " + run);
  const auto predict_before = run_attnlab("predict --run " + run + " \"1 2 3\"");
  REQUIRE(eval_before.code == 0);
  REQUIRE(predict_before.code == 0);

  TrainSettings s = tiny("reverse", "decoder");
  const std::string stem = CheckpointStore(run + "/checkpoints").stem(4);
  strip_description(stem, s);
  REQUIRE(read_checkpoint_metadata(stem).count("vocabulary") == 0);

  const auto eval_after = run_attnlab("eval --run " + run);
  CHECK(eval_after.code == 0);
  CHECK(eval_after.out == eval_before.out);
  const auto predict_after = run_attnlab("predict --run " + run + " \"1 2 3\"");
  CHECK(predict_after.code == 0);
  CHECK(predict_after.out == predict_before.out);
  const auto resumed = run_attnlab("train --resume " + run + " --steps 6 --quiet");
  INFO(resumed.out);
  CHECK(resumed.code == 0);
  CHECK(read_checkpoint_metadata(CheckpointStore(run + "/checkpoints").stem(6)).count("vocabulary") == 1);
}

TEST_CASE("eval and predict refuse a run whose vocab.txt no longer gives the checkpoint's vocabulary, naming the token",
          "[checkpoint][describe][cli]") {
  TempDir tmp("checkpoint-vocab-edited");
  std::string pairs;
  for (const char* w : {"red", "green", "blue", "cyan", "gray", "pink", "teal", "lime", "navy", "plum"})
    pairs += std::string(w) + " one\t" + w + " two\n";
  write_text(tmp / "pairs.tsv", pairs);
  const std::string run = tmp / "run";
  REQUIRE(run_attnlab("train --task pairs --file " + tmp / "pairs.tsv" + " --model decoder --d-model 16 --heads 2"
                      " --layers 1 --d-ff 32 --steps 2 --eval-every 2 --quiet --run " + run)
              .code == 0);
  std::ifstream in(run + "/vocab.txt");
  const std::string vocab((std::istreambuf_iterator<char>(in)), {});
  const size_t red = vocab.find("\nred\n"), one = vocab.find("\none\n");
  REQUIRE(red != std::string::npos);
  REQUIRE(one == red + 4);
  std::string swapped = vocab;
  swapped.replace(red, 9, "\none\nred\n");  // ids 4 and 5 exchanged: same size, other words
  write_text(run + "/vocab.txt", swapped);
  for (const std::string& command : {"eval --run " + run, "predict --run " + run + " \"red one\""}) {
    INFO(command);
    const auto r = run_attnlab(command);
    CHECK(r.code == 2);
    CHECK(r.out.find("vocab.txt gives: token 4 is \"one\" there, \"red\" in the checkpoint") != std::string::npos);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  write_text(run + "/vocab.txt", vocab);
  CHECK(run_attnlab("eval --run " + run).code == 0);
}
