// The decoder's bare layout (--layout bare, minGPT's adder and sort): the
// prompt's tokens then the answer's, no <bos>/<sep>/<eos>, the loss on the
// answer only, greedy decoding for exactly the answer's length; and the
// refusals where it does not apply.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "models/batch.h"
#include "models/decoder_lm.h"
#include "tests/fixtures.h"
#include "training/evaluate.h"

using namespace attnlab;
using attnlab::testing::read_summary;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;

namespace {

TransformerConfig bare_decoder() {
  TransformerConfig c = testing::model_config("decoder", 12, 16, 16, 4, 2, 32);
  c.layout = Layout::bare;
  return c;
}

std::vector<Real> pad_values(const Tensor& t) { return std::vector<Real>(t.data(), t.data() + t.numel()); }

void require_refused(const testing::CliResult& r, const std::string& needle) {
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  CHECK(r.out.find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("format_batch lays out the bare batch: src tgt, no specials, loss on tgt only", "[models][batch][bare]") {
  const FormattedBatch b = format_batch(BatchFormat::bare, {{{4, 5}, {6, 7}}, {{8}, {9}}});
  // tokens [4 5 6 7] -> inputs [4 5 6], targets [- 6 7]; [8 9] -> [8], [9], padded to 3.
  CHECK(b.input.tgt_in.shape == Shape{2, 3});
  CHECK(b.input.tgt_in.data == std::vector<int32_t>{4, 5, 6, 8, 0, 0});
  CHECK(pad_values(b.input.tgt_pad) == std::vector<Real>{0, 0, 0, 0, 1, 1});
  CHECK(b.targets.data == std::vector<int32_t>{-100, 6, 7, 9, -100, -100});
  CHECK(b.input.src.numel() == 0);
  CHECK_THROWS_WITH(format_batch(BatchFormat::bare, {{{4}, {5}}, {{}, {6}}}),
                    Catch::Contains("pair 1") && Catch::Contains("empty input"));
  CHECK_THROWS_WITH(format_batch(BatchFormat::bare, {{{4}, {}}}), Catch::Contains("empty output"));
}

TEST_CASE("prompt_length, answers_end_with_eos and batch_format follow the layout", "[models][batch][bare]") {
  CHECK(prompt_length(BatchFormat::decoder, 5) == 7);  // [bos] 5 tokens [sep]
  CHECK(prompt_length(BatchFormat::bare, 5) == 5);
  CHECK(prompt_length(BatchFormat::seq2seq, 5) == 1);  // [bos]
  CHECK(prompt_length(BatchFormat::encoder, 5) == 0);
  CHECK(answers_end_with_eos(BatchFormat::decoder));
  CHECK(answers_end_with_eos(BatchFormat::seq2seq));
  CHECK_FALSE(answers_end_with_eos(BatchFormat::bare));
  TransformerConfig c = bare_decoder();
  CHECK(batch_format(c, false) == BatchFormat::bare);
  CHECK(batch_format(c, true) == BatchFormat::lm);
  c.layout = Layout::special;
  CHECK(batch_format(c, false) == BatchFormat::decoder);
  CHECK(decoding_budget(3, c) == 4);  // the answer and its <eos>
  CHECK(decoding_budget(3, bare_decoder()) == 3);
}

TEST_CASE("layout bare is a decoder's: JSON round trip, refused for the encoder and seq2seq", "[models][bare]") {
  const TransformerConfig c = bare_decoder();
  CHECK(c.to_json()["layout"] == "bare");
  CHECK(TransformerConfig::from_json(c.to_json()).layout == Layout::bare);
  nlohmann::json old = c.to_json();
  old.erase("layout");  // a config written before the option: the special-token layout it was trained with
  CHECK(TransformerConfig::from_json(old).layout == Layout::special);
  for (const char* arch : {"encoder", "seq2seq"}) {
    nlohmann::json j = c.to_json();
    j["arch"] = arch;
    CHECK_THROWS_WITH(TransformerConfig::from_json(j), Catch::Contains("layout 'bare'") && Catch::Contains(arch));
  }
  nlohmann::json bad = c.to_json();
  bad["layout"] = "plain";
  CHECK_THROWS_WITH(TransformerConfig::from_json(bad), Catch::Contains("'bare', 'special'") && Catch::Contains("plain"));
}

TEST_CASE("a bare decoder decodes exactly its budget from the prompt alone, eos being an ordinary token",
          "[models][bare]") {
  DecoderLM model(bare_decoder(), 7);
  const std::vector<std::vector<int32_t>> sources = {{4, 5, 6}, {7}};
  DecodeLogits cached_logits, uncached_logits;
  const auto cached = model.greedy_cached(sources, {2, 4}, &cached_logits);
  const auto uncached = model.greedy_uncached(sources, {2, 4}, &uncached_logits);
  CHECK(cached == uncached);
  REQUIRE(cached[0].size() == 2);
  REQUIRE(cached[1].size() == 4);
  // The first answer token is read off the last prompt token of a plain forward over the prompt.
  ModelInput in;
  pad_sequences({sources[0]}, in.tgt_in, in.tgt_pad);
  Var logits = model.forward(in);  // (1, 3, V)
  const int64_t V = logits.size(2);
  for (int64_t v = 0; v < V; ++v)
    CHECK(cached_logits[0][0][static_cast<size_t>(v)] == Approx(logits.value()[2 * V + v]).margin(1e-5));
  // With eos the best token everywhere, the special layout stops at once; the bare one decodes on.
  model.parameter("head.bias").value()[SpecialTokens::eos] = 1e4f;
  CHECK(model.greedy(sources, {2, 4}) == std::vector<std::vector<int32_t>>{{2, 2}, {2, 2, 2, 2}});
  TransformerConfig special = bare_decoder();
  special.layout = Layout::special;
  DecoderLM with_eos(special, 7);
  with_eos.parameter("head.bias").value()[SpecialTokens::eos] = 1e4f;
  CHECK(with_eos.greedy(sources, {2, 4}) == std::vector<std::vector<int32_t>>{{}, {}});
  CHECK_THROWS_WITH(model.greedy({{}}, {1}), Catch::Contains("empty") && Catch::Contains("bare"));
}

TEST_CASE("teacher_forced_batch of a bare answer is its training batch, at positions 0..T-1", "[models][bare]") {
  const TransformerConfig c = bare_decoder();
  const FormattedBatch b = teacher_forced_batch(c, {4, 5}, {6, 7}, decoding_budget(2, c));
  CHECK(b.input.tgt_in.data == std::vector<int32_t>{4, 5, 6});
  CHECK(b.targets.data == std::vector<int32_t>{-100, 6, 7});
  CHECK(b.input.tgt_pos.data == std::vector<int32_t>{0, 1, 2});
  CHECK_FALSE(answer_spent_budget(c, {6, 7}, 2));  // no <eos> to miss
  // max_len 16: after input + answer = 16 tokens decoding could still read the 16th position; after
  // 17 it could not (as [bos] input [sep] answer passing 16 tokens), so that answer filled the table.
  CHECK_FALSE(answer_filled_table(c, std::vector<int32_t>(10, 4), std::vector<int32_t>(6, 5)));
  CHECK(answer_filled_table(c, std::vector<int32_t>(10, 4), std::vector<int32_t>(7, 5)));
}

TEST_CASE("train --layout bare is refused with one line for the encoder, seq2seq and a language model",
          "[cli][bare]") {
  require_refused(run_attnlab("train --task reverse --model encoder --layout bare --check"),
                  "--layout bare lays out a prompt and its answer in one sequence: it applies to --model decoder, "
                  "got --model encoder");
  require_refused(run_attnlab("train --task reverse --model seq2seq --layout bare --check"), "got --model seq2seq");
  require_refused(run_attnlab("train --task reverse --model decoder --layout none --check"),
                  "--layout must be");
  TempDir dir("bare-refusals");
  const std::string text = dir / "text.txt";
  std::ofstream(text) << "abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc\n";
  require_refused(run_attnlab("train --task text --file " + text + " --seq-len 8 --model decoder --layout bare --check"),
                  "is a language model");
}

TEST_CASE("a bare decoder learns reverse and eval, predict and attention read it bare", "[cli][bare]") {
  TempDir dir("bare-reverse");
  const std::string run = dir / "run", untrained = dir / "untrained";
  const std::string flags = " --task reverse --vocab 4 --min-len 4 --max-len 4 --model decoder --layout bare"
                            " --d-model 32 --heads 2 --layers 2 --d-ff 64 --batch-size 32 --heldout 100 --lr 3e-3"
                            " --eval-every 100 --threads 1 --quiet";
  testing::CliResult r = run_attnlab("train" + flags + " --steps 800 --target 1 --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(read_summary(run)["heldout_exact"].get<double>() == 1.0);
  REQUIRE(run_attnlab("train" + flags + " --steps 1 --run " + untrained).code == 0);
  CHECK(read_summary(untrained)["heldout_exact"].get<double>() < 0.1);  // the check above can fail
  std::ifstream ini(run + "/config.ini");
  const std::string config((std::istreambuf_iterator<char>(ini)), std::istreambuf_iterator<char>());
  CHECK(config.find("layout = bare") != std::string::npos);
  testing::CliResult p = run_attnlab("predict --run " + run + " \"3 0 2 1\"");
  INFO(p.out);
  CHECK(p.code == 0);
  CHECK(p.out.rfind("1 2 0 3\n", 0) == 0);
  testing::CliResult a = run_attnlab("attention --run " + run + " --out " + (dir / "maps") + " \"3 0 2 1\"");
  INFO(a.out);
  CHECK(a.code == 0);
  std::ifstream json(dir / "maps" + "/attention.json");
  const nlohmann::json maps = nlohmann::json::parse(json);
  CHECK(maps["output"] == "1 2 0 3");
  // The decoder read 4 + 4 - 1 = 7 tokens, none of them special.
  const auto& queries = maps["layers"][0]["queries"];
  REQUIRE(queries.size() == 7);
  CHECK(queries[0] == "3");
  CHECK(queries[4] == "1");
}

TEST_CASE("an input that fills a bare decoder's table is read, and a decoder's bos and sep are counted and named",
          "[cli][bare]") {
  TempDir dir("bare-table");
  const std::string bare = dir / "bare", special = dir / "special";
  const std::string model = " --model decoder --d-model 16 --heads 2 --layers 1 --d-ff 32 --steps 1 --threads 1 --quiet";
  // "a + b =" and its residue: 5 positions, the whole table
  REQUIRE(run_attnlab("train --task modular --modulus 5 --layout bare --positions 5 --batch-size 8" + model +
                      " --run " + bare).code == 0);
  for (const std::string& command : {std::string("predict"), "attention --out " + (dir / "maps")}) {
    testing::CliResult r = run_attnlab(command + " --run " + bare + " \"1 + 3 =\"");
    INFO(command << ": " << r.out);
    CHECK(r.code == 0);
  }
  REQUIRE(run_attnlab("train --task reverse --vocab 4 --min-len 2 --max-len 2 --positions 6 --heldout 4 --batch-size 8" +
                      model + " --run " + special).code == 0);
  require_refused(run_attnlab("predict --run " + special + " \"1 2 3 0 1\""),
                  "the input has 5 tokens; this model takes sequences of at most 6 positions and reads it as "
                  "[bos] input [sep], 7 positions");
  // A bare answer the table cuts is cut before its expected length: there is no <eos> to reach.
  const std::string cut = dir / "cut";
  REQUIRE(run_attnlab("train --task reverse --vocab 4 --min-len 2 --max-len 2 --positions 6 --heldout 4 --batch-size 8"
                      " --layout bare" + model + " --run " + cut).code == 0);
  testing::CliResult p = run_attnlab("predict --run " + cut + " \"1 2 3 0\"");
  INFO(p.out);
  CHECK(p.code == 0);
  CHECK(p.out.find("note: the answer reached the end of the model's positional table (6 positions, --positions when "
                   "it was trained) before its expected length; it may be cut short") != std::string::npos);
}
