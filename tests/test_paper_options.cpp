// The model options the papers use (models/config.h): no LayerNorm (--norm
// none, Nanda et al.'s grokking model), attention-only blocks (Olsson et al.'s
// induction-head models) and no biases. Their fields in JSON, the parameters and
// hook points each leaves out, what a block computes without them, the
// interventions' components, gpt2 init, and the CLI: train, resume, hooks,
// gradcheck, ablate. (Gradients: tests/gradcheck/test_models.cpp; PyTorch
// parity: tests/test_parity.cpp; cached decoding: tests/test_kv_cache.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/ops/elementwise.h"
#include "interventions/components.h"
#include "models/blocks.h"
#include "models/sequence_model.h"
#include "tests/child_process.h"
#include "tests/cli_harness.h"
#include "tests/fixtures.h"

using namespace attnlab;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;

namespace {

TransformerConfig small(const std::string& arch) { return testing::model_config(arch, 12, 16, 8, 2, 2, 16); }

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool any_name(const std::vector<std::string>& names, const std::string& part) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return contains(n, part); });
}

bool is_layer_norm(const std::string& name) {
  for (const char* n : {"ln1.", "ln2.", "ln3.", "ln_f."})
    if (contains(name, n)) return true;
  return false;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::equal(a.data(), a.data() + a.numel(), b.data());
}

Tensor random_stream(Shape shape, uint64_t seed) {
  Rng rng(seed);
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(-1, 1));
  return t;
}

const char* const kArchs[] = {"encoder", "decoder", "seq2seq"};

}  // namespace

// ---- the config ---------------------------------------------------------------------

TEST_CASE("norm none, attention_only and no_bias round-trip through JSON and missing keys mean off", "[models][config]") {
  TransformerConfig c = small("seq2seq");
  c.norm = Norm::none;
  c.attention_only = true;
  c.no_bias = true;
  const nlohmann::json j = c.to_json();
  CHECK(j.at("norm") == "none");
  CHECK(j.at("attention_only") == true);
  CHECK(j.at("no_bias") == true);
  const TransformerConfig back = TransformerConfig::from_json(j);
  CHECK(back.norm == Norm::none);
  CHECK(back.attention_only);
  CHECK(back.no_bias);
  CHECK(back.to_json() == j);

  nlohmann::json old = j;  // a config written before the options existed
  old.erase("attention_only");
  old.erase("no_bias");
  const TransformerConfig defaults = TransformerConfig::from_json(old);
  CHECK_FALSE(defaults.attention_only);
  CHECK_FALSE(defaults.no_bias);
}

TEST_CASE("a bad value of the new fields is refused naming the field", "[models][config]") {
  nlohmann::json j = small("decoder").to_json();
  j["attention_only"] = 1;
  CHECK_THROWS_WITH(TransformerConfig::from_json(j), "config field 'attention_only' must be true or false, got 1");
  j = small("decoder").to_json();
  j["no_bias"] = "yes";
  CHECK_THROWS_WITH(TransformerConfig::from_json(j), "config field 'no_bias' must be true or false, got \"yes\"");
  j = small("decoder").to_json();
  j["norm"] = "rms";
  CHECK_THROWS_WITH(TransformerConfig::from_json(j), Catch::Contains("'rms'") && Catch::Contains("none"));
}

// ---- parameters ------------------------------------------------------------------------

TEST_CASE("norm none: no LayerNorm in any block nor at the end of any stack, of every model kind", "[models]") {
  for (const char* arch : kArchs) {
    INFO(arch);
    TransformerConfig c = small(arch);
    const int64_t with_norms = make_model(c, 1)->parameter_count();
    c.norm = Norm::none;
    auto model = make_model(c, 1);
    const std::vector<std::string> names = names_of(*model);
    for (const std::string& n : names) CHECK_FALSE(is_layer_norm(n));
    CHECK(any_name(names, "blocks.0.attn.q_proj.weight"));
    // Pre-LN: 2 norms per block (3 in seq2seq's decoder) and one per stack, 2d parameters each.
    const int64_t norms = std::string(arch) == "seq2seq" ? 2 * 2 + 2 * 3 + 2 : 2 * 2 + 1;
    CHECK(model->parameter_count() == with_norms - norms * 2 * c.d_model);
  }
}

TEST_CASE("attention-only: no feed-forward and no norm in front of it, and seq2seq's decoder keeps ln2 for cross-attention",
          "[models]") {
  TransformerConfig c = small("decoder");
  c.attention_only = true;
  std::vector<std::string> names = names_of(*make_model(c, 1));
  CHECK_FALSE(any_name(names, ".ff."));
  CHECK_FALSE(any_name(names, ".ln2."));
  CHECK(any_name(names, "blocks.1.ln1.weight"));
  CHECK(any_name(names, "ln_f.weight"));

  c = small("seq2seq");
  c.attention_only = true;
  names = names_of(*make_model(c, 1));
  CHECK_FALSE(any_name(names, ".ff."));
  CHECK_FALSE(any_name(names, "encoder.blocks.0.ln2."));
  CHECK_FALSE(any_name(names, ".ln3."));
  CHECK(any_name(names, "decoder.blocks.0.ln2.weight"));  // the norm of cross-attention
  CHECK(any_name(names, "decoder.blocks.1.cross_attn.k_proj.weight"));

  c.norm = Norm::post;  // post-LN keeps the norm after each attention
  names = names_of(*make_model(c, 1));
  CHECK(any_name(names, "encoder.blocks.0.ln1.weight"));
  CHECK_FALSE(any_name(names, "encoder.blocks.0.ln2."));
  CHECK(any_name(names, "decoder.blocks.0.ln2.weight"));
  CHECK_FALSE(any_name(names, ".ln3."));
}

TEST_CASE("no_bias: the only biases left are LayerNorm's, on every model kind, tied or not", "[models]") {
  for (const char* arch : kArchs)
    for (bool tied : {false, true}) {
      INFO(arch << (tied ? " tied" : ""));
      TransformerConfig c = small(arch);
      c.no_bias = true;
      c.tie_embeddings = tied;
      const std::vector<std::string> names = names_of(*make_model(c, 1));
      int64_t norm_biases = 0;
      for (const std::string& n : names) {
        const bool bias = n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
        if (bias) {
          INFO(n);
          CHECK(is_layer_norm(n));
          ++norm_biases;
        }
      }
      CHECK(norm_biases > 0);  // LayerNorm keeps its beta
      CHECK(any_name(names, "attn.out_proj.weight"));
      CHECK(any_name(names, "ff.fc2.weight"));
    }
}

TEST_CASE("all three: a decoder of token embedding, attention weights and the head's weight only", "[models]") {
  TransformerConfig c = small("decoder");
  c.norm = Norm::none;
  c.attention_only = true;
  c.no_bias = true;
  std::vector<std::string> expected = {"tok_emb.weight"};
  for (const std::string b : {"blocks.0.attn.", "blocks.1.attn."})
    for (const std::string p : {"q_proj", "k_proj", "v_proj", "out_proj"}) expected.push_back(b + p + ".weight");
  expected.push_back("head.weight");
  CHECK(names_of(*make_model(c, 1)) == expected);
  c.tie_embeddings = true;
  expected.pop_back();  // the tied head has neither weight nor bias of its own
  CHECK(names_of(*make_model(c, 1)) == expected);
}

// ---- what the blocks compute ------------------------------------------------------------

TEST_CASE("a block without norms computes x + f(x) per sublayer, and attention-only stops after attention",
          "[models]") {
  TransformerConfig c = small("encoder");
  c.norm = Norm::none;
  Rng init(3), drop(4);
  EncoderBlock block(c, init, drop);
  block.eval();
  REQUIRE(block.ln1 == nullptr);
  REQUIRE(block.ln2 == nullptr);
  const Var x(random_stream({2, 5, c.d_model}, 5));
  const Var h = x + block.attn->forward(x);
  CHECK(same_bits(block.forward(x, nullptr).value(), (h + block.ff->forward(h)).value()));

  c.attention_only = true;
  for (Norm norm : {Norm::none, Norm::pre, Norm::post}) {
    INFO(name_of(norm));
    c.norm = norm;
    Rng init2(3), drop2(4);
    EncoderBlock only(c, init2, drop2);
    only.eval();
    REQUIRE(only.ff == nullptr);
    REQUIRE(only.ln2 == nullptr);
    Var want = norm == Norm::none ? x + only.attn->forward(x)
               : norm == Norm::pre ? x + only.attn->forward(only.ln1->forward(x))
                                   : only.ln1->forward(x + only.attn->forward(x));
    CHECK(same_bits(only.forward(x, nullptr).value(), want.value()));
  }
}

TEST_CASE("a decoder block with cross-attention, attention-only and without norms: x + self(x), then + cross(h)",
          "[models]") {
  TransformerConfig c = small("seq2seq");
  c.norm = Norm::none;
  c.attention_only = true;
  Rng init(3), drop(4);
  DecoderBlock block(c, true, init, drop);
  block.eval();
  REQUIRE(block.self_norm() == nullptr);
  REQUIRE(block.cross_norm() == nullptr);
  REQUIRE(block.ff_norm() == nullptr);
  REQUIRE(block.ff == nullptr);
  const Var x(random_stream({2, 4, c.d_model}, 6)), memory(random_stream({2, 3, c.d_model}, 7));
  const Var h = x + block.self_attn->forward(x, Var(), true);
  const Var want = h + block.cross_attn->forward(h, memory);
  CHECK(same_bits(block.forward(x, nullptr, memory).value(), want.value()));
}

// ---- hook points and components -----------------------------------------------------------

TEST_CASE("attention-only blocks declare no mlp.* point: resid_post follows the last attention", "[models][hooks]") {
  TransformerConfig c = small("decoder");
  c.attention_only = true;
  std::vector<std::string> expected = {"embed"};
  for (const std::string b : {"blocks.0.", "blocks.1."})
    for (const std::string p : {"resid_pre", "attn.scores", "attn.pattern", "attn.z", "attn.out", "resid_post"})
      expected.push_back(b + p);
  expected.push_back("ln_final");
  expected.push_back("logits");
  auto model = make_model(c, 2);
  CHECK(model->hooks().names() == expected);
  CHECK_THROWS_WITH(model->hooks().observe("blocks.0.mlp.out", [](const std::string&, const Var&) {}),
                    Catch::Contains("no hook point named 'blocks.0.mlp.out'"));

  c = small("seq2seq");
  c.attention_only = true;
  model = make_model(c, 2);
  const std::vector<std::string>& names = model->hooks().names();
  for (const std::string& n : names) CHECK_FALSE(contains(n, "mlp."));
  CHECK_FALSE(any_name(names, "resid_mid_cross"));
  CHECK_FALSE(any_name(names, "encoder.blocks.0.resid_mid"));
  CHECK(any_name(names, "decoder.blocks.0.resid_mid"));  // between self- and cross-attention
  // A forward passes each declared point once, in order.
  std::vector<std::string> seen;
  for (const std::string& name : names)
    model->hooks().observe(name, [&seen](const std::string& n, const Var&) { seen.push_back(n); });
  ModelInput in;
  in.src = IntTensor({1, 3});
  in.src.data = {4, 5, 6};
  in.tgt_in = IntTensor({1, 2});
  in.tgt_in.data = {1, 7};
  InferenceGuard guard(*model);
  model->forward(in);
  CHECK(seen == names);
}

TEST_CASE("an attention-only model has no MLP components and naming one is refused with what the model has",
          "[models][interventions]") {
  TransformerConfig c = small("seq2seq");
  c.attention_only = true;
  for (const Component& k : model_components(c)) {
    INFO(k.name());
    CHECK(k.kind != ComponentKind::mlp);
    for (const std::string& p : k.points(c)) CHECK_FALSE(contains(p, "mlp"));
  }
  const std::vector<std::string> layer = components_named(c, {"decoder.blocks.1"}).at(0).points(c);
  CHECK(layer == std::vector<std::string>{"decoder.blocks.1.self_attn.out", "decoder.blocks.1.cross_attn.out"});
  CHECK_THROWS_WITH(components_named(c, {"encoder.blocks.0.mlp"}),
                    "no component named 'encoder.blocks.0.mlp' (this model has encoder.blocks.0-1, heads h0-h1 in "
                    "attn; decoder.blocks.0-1, heads h0-h1 in self_attn and cross_attn)");
}

TEST_CASE("gpt2 init counts one residual branch per attention-only block (two in seq2seq's decoder)",
          "[models][init]") {
  TransformerConfig c = testing::model_config("seq2seq", 12, 16, 64, 4, 3, 64);
  c.attention_only = true;
  c.no_bias = true;
  c.init = InitScheme::gpt2;
  auto model = make_model(c, 7);
  for (const auto& [name, p] : model->named_parameters()) {
    if (!contains(name, "out_proj.weight")) continue;
    const bool decoder = name.rfind("decoder.", 0) == 0;
    const double want = 0.02 / std::sqrt((decoder ? 2.0 : 1.0) * 3);
    double sum = 0;
    for (int64_t i = 0; i < p.value().numel(); ++i) sum += double(p.value()[i]) * p.value()[i];
    INFO(name);
    CHECK(std::sqrt(sum / static_cast<double>(p.value().numel())) == Approx(want).epsilon(0.1));
  }
}

// ---- the command line ---------------------------------------------------------------------

namespace {
const std::string kTinyTrain =
    " --task reverse --vocab 6 --min-len 2 --max-len 4 --d-model 16 --heads 2 --layers 2 --batch-size 8"
    " --heldout 8 --eval-every 2 --threads 1 --quiet";
}

TEST_CASE("attnlab train takes --norm none --attention-only --no-bias, records them, and resumes bitwise",
          "[cli][models]") {
  TempDir dir("cli-paper-options");
  const std::string flags = kTinyTrain + " --model decoder --norm none --attention-only --no-bias";
  REQUIRE(run_attnlab("train" + flags + " --steps 4 --run " + dir / "whole").code == 0);
  const std::string config = attnlab::testing::slurp(dir / "whole/config.ini");
  CHECK(contains(config, "\nnorm = none\n"));
  CHECK(contains(config, "\nattention-only = true\n"));
  CHECK(contains(config, "\nno-bias = true\n"));
  REQUIRE(run_attnlab("train" + flags + " --steps 2 --run " + dir / "split").code == 0);
  REQUIRE(run_attnlab("train --quiet --resume " + dir / "split" + " --steps 4").code == 0);
  attnlab::testing::require_same_run(dir / "whole", dir / "split", 4);
  // The checkpoint reloads as the model it was: eval and hooks read it.
  CHECK(run_attnlab("eval --run " + dir / "whole").code == 0);
  const auto hooks = run_attnlab("hooks --run " + dir / "whole");
  REQUIRE(hooks.code == 0);
  CHECK(contains(hooks.out, "blocks.1.attn.z"));
  CHECK_FALSE(contains(hooks.out, "mlp."));
  // --config repeats it.
  REQUIRE(run_attnlab("train --quiet --config " + dir / "whole/config.ini" + " --steps 4 --run " + dir / "again")
              .code == 0);
  attnlab::testing::require_same_run(dir / "whole", dir / "again", 4);
}

TEST_CASE("attention-only refuses --d-ff and --activation, since its blocks have no feed-forward",
          "[cli][models]") {
  for (const char* flag : {"--d-ff 32", "--activation gelu"}) {
    const auto r = run_attnlab("train --attention-only " + std::string(flag) + " --run /nonexistent/x");
    CHECK(r.code == 2);
    CHECK(r.out == "attnlab train: --" + std::string(flag).substr(2, std::string(flag).find(' ') - 2) +
                       " does not apply to --attention-only (its blocks have no feed-forward)\n");
  }
  // A config file's d-ff (config.ini records one) is not refused, nor counted in the memory a run needs.
  TempDir dir("cli-paper-options-memory");
  std::ofstream(dir / "big.ini") << "d-ff = 100000000\n";
  CHECK(contains(run_attnlab("train --check --config " + dir / "big.ini" + " --run " + dir / "a").out, "GiB of memory"));
  std::ofstream(dir / "big.ini", std::ios::app) << "attention-only = true\n";
  const auto r = run_attnlab("train --check --config " + dir / "big.ini" + " --run " + dir / "b");
  INFO(r.out);
  CHECK(r.code == 0);
}

TEST_CASE("attnlab gradcheck passes with no norms, attention-only blocks and no biases together", "[cli][gradcheck]") {
  for (const char* model : {"encoder", "seq2seq"}) {
    const auto r = run_attnlab(std::string("gradcheck --task reverse --model ") + model +
                               " --layers 1 --d-model 8 --heads 2 --norm none --attention-only --no-bias");
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(contains(r.out, "gradcheck passed"));
  }
}

TEST_CASE("attnlab ablate of an attention-only run: its layers and heads, and a clear refusal of an MLP",
          "[cli][models]") {
  TempDir dir("cli-paper-options-ablate");
  REQUIRE(run_attnlab("train" + kTinyTrain + " --model encoder --attention-only --steps 2 --run " + dir / "run").code ==
          0);
  const auto all = run_attnlab("ablate --run " + dir / "run" + " --json");
  REQUIRE(all.code == 0);
  CHECK(contains(all.out, "\"blocks.1\""));
  CHECK(contains(all.out, "\"blocks.0.attn.h1\""));
  CHECK_FALSE(contains(all.out, "mlp"));
  const auto mlp = run_attnlab("ablate --run " + dir / "run" + " --what blocks.0.mlp");
  CHECK(mlp.code == 2);
  CHECK(contains(mlp.out, "no component named 'blocks.0.mlp' (this model has blocks.0-1, heads h0-h1 in attn)"));
}
