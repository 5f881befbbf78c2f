// The initialisation schemes (models/init.h): "torch" is what the layers draw
// while being built; "gpt2" redraws every parameter by its rule. Each rule is
// checked on the parameters it names, with sample-size-aware bounds.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "models/config.h"
#include "models/init.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"

using namespace attnlab;

namespace {

TransformerConfig config_for(const std::string& arch, const std::string& init, int64_t layers = 3) {
  TransformerConfig c = testing::model_config(arch, 12, 16, 48, 3, layers, 96);
  c.positional = Positional::learned;
  c.init = parse_choice<InitScheme>("init", init);
  return c;
}

struct Moments {
  double mean = 0, stddev = 0;
  int64_t n = 0;
};

Moments moments(const Var& p) {
  const Tensor& t = p.value();
  Moments m;
  m.n = t.numel();
  for (int64_t i = 0; i < m.n; ++i) m.mean += t[i];
  m.mean /= static_cast<double>(m.n);
  for (int64_t i = 0; i < m.n; ++i) m.stddev += (t[i] - m.mean) * (t[i] - m.mean);
  m.stddev = std::sqrt(m.stddev / static_cast<double>(m.n));
  return m;
}

// The sample of n draws from N(0, sigma): its mean within 6 standard errors of
// 0 and its standard deviation within 6 of sigma (the error of a sample
// standard deviation is about sigma / sqrt(2n)). 6 sigma: a false alarm is
// a one-in-a-billion draw, and a wrong scale by 10% is caught for n >= 2000.
void require_normal(const std::string& name, const Var& p, double sigma) {
  const Moments m = moments(p);
  INFO(name << ": n " << m.n << ", mean " << m.mean << ", std " << m.stddev << ", expected std " << sigma);
  REQUIRE(std::abs(m.mean) <= 6 * sigma / std::sqrt(static_cast<double>(m.n)));
  REQUIRE(std::abs(m.stddev - sigma) <= 6 * sigma / std::sqrt(2.0 * static_cast<double>(m.n)));
}

void require_all(const std::string& name, const Var& p, Real value) {
  const Tensor& t = p.value();
  for (int64_t i = 0; i < t.numel(); ++i) {
    INFO(name << "[" << i << "] = " << t[i]);
    REQUIRE(t[i] == value);
  }
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_norm(const std::string& name) {
  for (const char* n : {"ln1.", "ln2.", "ln3.", "ln_f."})
    if (name.find(n) != std::string::npos) return true;
  return false;
}

bool is_residual_output(const std::string& name) {
  return name.find("out_proj.weight") != std::string::npos || name.find("fc2.weight") != std::string::npos;
}

// Checks every parameter of a gpt2-initialised model against its rule;
// `residual_std(name)` is the expected std of a residual output projection.
void require_gpt2_rules(const SequenceModel& model, const std::function<double(const std::string&)>& residual_std) {
  int64_t residual = 0, plain = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    if (is_norm(name)) {
      require_all(name, p, ends_with(name, ".weight") ? Real(1) : Real(0));
    } else if (ends_with(name, ".bias")) {
      require_all(name, p, 0);
    } else if (is_residual_output(name)) {
      require_normal(name, p, residual_std(name));
      ++residual;
    } else {
      require_normal(name, p, 0.02);  // q/k/v projections, fc1, the head, tok_emb, pos_emb
      ++plain;
    }
  }
  REQUIRE(residual > 0);
  REQUIRE(plain > 0);
}

}  // namespace

TEST_CASE("gpt2 init draws weights from N(0, 0.02), residual outputs from N(0, 0.02 over root 2L), biases 0",
          "[models][init]") {
  for (const std::string arch : {"encoder", "decoder"}) {
    INFO(arch);
    auto model = make_model(config_for(arch, "gpt2"), 7);
    require_gpt2_rules(*model, [](const std::string&) { return 0.02 / std::sqrt(2.0 * 3); });
  }
}

TEST_CASE("gpt2 init scales seq2seq's decoder outputs by its 3 residual branches per block and the encoder's by 2",
          "[models][init]") {
  TransformerConfig c = config_for("seq2seq", "gpt2", 2);
  c.tie_embeddings = true;  // the tied head is tok_emb: drawn once, at 0.02
  auto model = make_model(c, 7);
  require_gpt2_rules(*model, [](const std::string& name) {
    const bool decoder = name.rfind("decoder.", 0) == 0;
    return 0.02 / std::sqrt((decoder ? 3.0 : 2.0) * 2);
  });
}

TEST_CASE("gpt2 init is a deterministic draw of the seed that differs from torch's layer draws, and auto, the "
          "default, is gpt2 with learned positions",
          "[models][init]") {
  TransformerConfig auto_config = config_for("decoder", "torch");  // learned positions
  auto_config.init = TransformerConfig().init;
  REQUIRE(auto_config.init == InitScheme::automatic);
  auto torch_a = make_model(config_for("decoder", "torch"), 3), torch_b = make_model(config_for("decoder", "torch"), 3);
  auto gpt2_a = make_model(auto_config, 3), gpt2_b = make_model(config_for("decoder", "gpt2"), 3);
  CHECK(gpt2_a->config().init == InitScheme::gpt2);  // the model, and so its checkpoints, name the scheme it was built with
  auto gpt2_c = make_model(config_for("decoder", "gpt2"), 4);
  const auto ta = torch_a->parameters(), tb = torch_b->parameters();
  const auto ga = gpt2_a->parameters(), gb = gpt2_b->parameters(), gc = gpt2_c->parameters();
  REQUIRE(ta.size() == ga.size());
  bool gpt2_repeats = true, gpt2_seeded = false, schemes_differ = false;
  for (size_t i = 0; i < ta.size(); ++i) {
    REQUIRE(ta[i].value().flat() == tb[i].value().flat());
    gpt2_repeats = gpt2_repeats && ga[i].value().flat() == gb[i].value().flat();
    gpt2_seeded = gpt2_seeded || ga[i].value().flat() != gc[i].value().flat();
    schemes_differ = schemes_differ || ta[i].value().flat() != ga[i].value().flat();
  }
  CHECK(gpt2_repeats);
  CHECK(gpt2_seeded);
  CHECK(schemes_differ);
  // Token embeddings: torch.nn.Embedding's N(0, 1) under torch.
  require_normal("tok_emb.weight", torch_a->parameter("tok_emb.weight"), 1.0);
}

TEST_CASE("auto init is torch beside sinusoidal, rotary or no positions: the layers' own draws", "[models][init]") {
  for (const char* positional : {"sinusoidal", "rope", "none"}) {
    INFO(positional);
    TransformerConfig c = config_for("decoder", "auto"), torch_config = config_for("decoder", "torch");
    c.positional = torch_config.positional = parse_choice<Positional>("positional", positional);
    CHECK(resolved_init(c) == InitScheme::torch);
    auto a = make_model(c, 5), t = make_model(torch_config, 5);
    CHECK(a->config().init == InitScheme::torch);
    const auto pa = a->parameters(), pt = t->parameters();
    REQUIRE(pa.size() == pt.size());
    for (size_t i = 0; i < pa.size(); ++i) REQUIRE(pa[i].value().flat() == pt[i].value().flat());
  }
  TransformerConfig explicit_gpt2 = config_for("decoder", "gpt2");
  explicit_gpt2.positional = Positional::sinusoidal;
  CHECK(resolved_init(explicit_gpt2) == InitScheme::gpt2);  // an explicit scheme is kept whatever the positions
}

TEST_CASE("init round-trips through the config JSON, a config without it means torch, a bad one is named",
          "[models][init][config]") {
  const TransformerConfig c = config_for("decoder", "gpt2");
  CHECK(c.to_json().at("init") == "gpt2");
  CHECK(TransformerConfig::from_json(c.to_json()).init == InitScheme::gpt2);
  nlohmann::json old = c.to_json();
  old.erase("init");
  CHECK(TransformerConfig::from_json(old).init == InitScheme::torch);
  old["init"] = "xavier";
  CHECK_THROWS_WITH(TransformerConfig::from_json(old), Catch::Contains("init") && Catch::Contains("'xavier'"));
}

TEST_CASE("init_std sets the gpt2 scheme's spread: weights at s, residual outputs at s over root 2L", "[models][init]") {
  TransformerConfig c = config_for("decoder", "gpt2");
  c.init_std = 0.09;  // about 1/sqrt(128), Nanda et al.'s scale
  auto model = make_model(c, 7);
  for (const auto& [name, p] : model->named_parameters()) {
    if (is_norm(name) || ends_with(name, ".bias")) continue;
    require_normal(name, p, is_residual_output(name) ? 0.09 / std::sqrt(2.0 * 3) : 0.09);
  }
}

TEST_CASE("init_std round-trips through the config JSON, a config without it means 0.02, and it needs gpt2",
          "[models][init][config]") {
  TransformerConfig c = config_for("decoder", "gpt2");
  c.init_std = 0.0625;
  CHECK(c.to_json().at("init_std") == 0.0625);
  CHECK(TransformerConfig::from_json(c.to_json()).init_std == 0.0625);
  nlohmann::json old = c.to_json();
  old.erase("init_std");
  CHECK(TransformerConfig::from_json(old).init_std == 0.02);
  old["init_std"] = 0;
  CHECK_THROWS_WITH(TransformerConfig::from_json(old), "init_std must be finite and > 0, got 0");
  old["init_std"] = 0.05;
  old["init"] = "torch";
  CHECK_THROWS_WITH(TransformerConfig::from_json(old), "init_std applies to init 'gpt2', and this model's is 'torch' "
                                                       "(init 'torch')");
  old["init_std"] = 0.02;  // the default with torch: nothing was asked for
  CHECK_NOTHROW(TransformerConfig::from_json(old));
}
