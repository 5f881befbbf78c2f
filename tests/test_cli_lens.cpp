// attnlab lens (cli/lens.cpp) on trained runs: its --logits are the lens of the
// checkpoint's own model (the last point bitwise its forward), its JSON agrees
// with them and with itself (parts sum to the logit), its tables say what they
// show, a post-LN run is refused attribution in one line, and bad input is one
// line, exit 2, nothing written.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include "framework/io/safetensors.h"
#include "interventions/lens.h"
#include "tests/cli_harness.h"

using namespace attnlab;
using testing::run_attnlab;

namespace {

const char* const kTiny = " --d-model 16 --heads 2 --layers 2 --d-ff 32 --steps 30 --eval-every 30 --quiet --threads 1"
                          " --vocab 6 --min-len 3 --max-len 5";

// The model of the run's one checkpoint (step 30), as train wrote it.
std::unique_ptr<SequenceModel> checkpoint_model(const std::string& run) {
  const SafetensorsData file = load_safetensors(run + "/checkpoints/step-00000030.safetensors");
  auto model = make_model(TransformerConfig::from_json(nlohmann::json::parse(file.metadata.at("model_config"))), 0);
  for (auto& [name, p] : model->named_parameters()) p.value() = *file.find(name);
  return model;
}

IntTensor ids_of(const nlohmann::json& row) {
  IntTensor t({1, static_cast<int64_t>(row.size())});
  t.data = row.get<std::vector<int32_t>>();
  return t;
}

}  // namespace

TEST_CASE("lens --logits is the checkpoint's lens: its last point bitwise the model's logits, and --json agrees", "[cli][lens]") {
  testing::TempDir dir("cli-lens");
  const std::string run = dir / "dec", logits_file = dir / "lens.safetensors";
  REQUIRE(run_attnlab("train --run " + run + " --task sort --model decoder" + kTiny).code == 0);
  const testing::CliResult r = run_attnlab("lens --run " + run + " \"3 1 2 0\" --json --logits " + logits_file);
  REQUIRE(r.code == 0);
  const nlohmann::json e = nlohmann::json::parse(r.out);
  CHECK(e["points"] == nlohmann::json({"embed", "blocks.0.resid_post", "blocks.1.resid_post"}));
  CHECK(e["tokens"] == nlohmann::json({"<bos>", "3", "1", "2", "0", "<sep>", "0", "1", "2", "3"}));
  CHECK(e["answers"][4].is_null());
  CHECK(e["answers"][5] == "0");
  CHECK(e["answers"][9] == "<eos>");
  const Tensor lens = *load_safetensors(logits_file).find("lens");  // (P, 1, T, V)
  auto model = checkpoint_model(run);
  ModelInput in;
  in.tgt_in = ids_of(e["ids"]["tgt_in"]);
  InferenceGuard guard(*model);
  const Tensor logits = model->forward(in).value();  // (1, T, V)
  REQUIRE(lens.numel() == 3 * logits.numel());
  CHECK(std::equal(logits.data(), logits.data() + logits.numel(), lens.data() + 2 * logits.numel()));
  const int64_t V = logits.size(-1);
  for (size_t p = 0; p < 3; ++p)
    for (size_t t = 0; t < e["tokens"].size(); ++t) {
      const Real* row = lens.data() + (static_cast<int64_t>(p * e["tokens"].size() + t)) * V;
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]));
      const nlohmann::json& c = e["lens"][p][t];
      CHECK(c["p_top"].get<double>() == Approx(std::exp(row[c["top_id"].get<int>()]) / sum).epsilon(1e-6));
      if (!e["answers"][t].is_null())
        CHECK(c["p_answer"].get<double>() == Approx(std::exp(row[e["ids"]["targets"][t].get<int>()]) / sum).epsilon(1e-6));
    }
  REQUIRE(e["attribution"].size() == 5);
  for (const nlohmann::json& a : e["attribution"]) {
    double sum = 0;
    for (const nlohmann::json& part : a["parts"]) sum += part["logit"].get<double>();
    CHECK(sum == Approx(a["logit"].get<double>()).epsilon(1e-4));
    const Real* row = logits.data() + a["position"].get<int64_t>() * V;
    CHECK(a["logit"].get<double>() == row[a["answer_id"].get<int>()]);
  }
}

TEST_CASE("lens prints the lens and the attribution as tables, and a post-LN run's attribution as one line", "[cli][lens]") {
  testing::TempDir dir("cli-lens-tables");
  const std::string enc = dir / "enc", post = dir / "post";
  REQUIRE(run_attnlab("train --run " + enc + " --task reverse" + kTiny).code == 0);
  REQUIRE(run_attnlab("train --run " + post + " --task copy --norm post" + kTiny).code == 0);
  testing::CliResult r = run_attnlab("lens --run " + enc + " \"3 1 2\" --top 2");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("logit lens of " + enc + " (step 30, encoder)") == 0);
  CHECK(r.out.find("\nright answer         2           1           3") != std::string::npos);
  CHECK(r.out.find("\nblocks.1.resid_post  ") != std::string::npos);
  CHECK(r.out.find("the right answer's probability and rank (#1 = top):") != std::string::npos);
  CHECK(r.out.find("scale 1/sigma frozen at this input's value") != std::string::npos);
  CHECK(r.out.find("\nlogit (all parts)") != std::string::npos);
  // --top 2: the header, the 2 largest parts, the logit.
  const size_t table = r.out.find('\n', r.out.find("\ndirect logit attribution")  + 1) + 1;
  CHECK(std::count(r.out.begin() + static_cast<std::ptrdiff_t>(table), r.out.end(), '\n') == 4);
  r = run_attnlab("lens --run " + post + " \"3 1 2\" --json");
  REQUIRE(r.code == 0);
  const nlohmann::json e = nlohmann::json::parse(r.out);
  CHECK(e["attribution"].is_null());
  CHECK(e["attribution_note"] == "direct logit attribution needs a pre-LN or norm-free model: a post-LN block "
                                 "renormalises the stream, so no sum of parts gives the logit");
  r = run_attnlab("lens --run " + post + " \"3 1 2\"");
  CHECK(r.out.find("\ndirect logit attribution of the right answer's logit: direct logit attribution needs a pre-LN "
                   "or norm-free model") != std::string::npos);
}

TEST_CASE("lens refuses bad input in one line, exit 2, writing nothing", "[cli][lens]") {
  testing::TempDir dir("cli-lens-errors");
  const std::string run = dir / "enc", file = dir / "out.safetensors";
  REQUIRE(run_attnlab("train --run " + run + " --task reverse" + kTiny).code == 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\"3 9 1\"", "attnlab lens: unknown symbol '9' (known: 0..5 and <pad> <bos> <eos> <sep>)\n"},
      {"\"\"", "attnlab lens: the input sequence is empty\n"},
      {"\"3 1 2\" --top -1", "attnlab lens: --top must be >= 0, got -1\n"},
      {"\"3 <eos> 1\"", "attnlab lens: the input holds the special token <eos>; write only the task's symbols "
                        "(attnlab tasks shows them)\n"},
  };
  for (const auto& [args, line] : cases) {
    const testing::CliResult r = run_attnlab("lens --run " + run + " " + args + " --logits " + file);
    CHECK(r.code == 2);
    CHECK(r.out == line);
    CHECK_FALSE(std::filesystem::exists(file));
  }
  const testing::CliResult r = run_attnlab("lens --run " + dir / "none" + " \"3 1\"");
  CHECK(r.code == 2);
  CHECK(r.out == "attnlab lens: run directory '" + dir / "none" + "' does not exist\n");
}
