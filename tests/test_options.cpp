// The option tables (models/model_options.h, training/settings_options.h):
// each option declared once, and what reads them agrees with them.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "models/config.h"
#include "models/model_options.h"
#include "training/settings_options.h"

using namespace attnlab;

TEST_CASE("the model table names every JSON field once, and every model flag is a flag of train", "[options]") {
  std::set<std::string> keys, train_flags;
  for (const TrainOption& o : train_options()) REQUIRE(train_flags.insert(o.flag).second);  // no flag twice
  for (const ModelOption& o : model_options()) {
    INFO(o.key);
    REQUIRE(keys.insert(o.key).second);
    CHECK(train_flags.count(o.flag) == (o.flag[0] == '\0' ? 0u : 1u));
  }
  std::set<std::string> json_keys;
  const nlohmann::json json = TransformerConfig().to_json();  // held: items() refers to it
  for (const auto& [key, value] : json.items()) json_keys.insert(key);
  CHECK(json_keys == keys);
}

TEST_CASE("a train option's field is the one its table entry names", "[options]") {
  TrainSettings s = default_settings();
  s.model.d_model = 48;
  s.optim.lr = 0.25;
  s.model.positional = Positional::rope;
  auto field = [&](const std::string& flag) {
    for (const TrainOption& o : train_options())
      if (flag == o.flag) return o.field(s);
    FAIL("no option " << flag);
    return FieldRef{};
  };
  CHECK(*std::get<int64_t*>(field("d-model")) == 48);
  CHECK(*std::get<double*>(field("lr")) == 0.25);
  CHECK(*std::get<Positional*>(field("positional")) == Positional::rope);
  CHECK(std::get<uint64_t*>(field("seed")) == &s.seed);
}

TEST_CASE("a resume may change how long a run goes and how it reports, nothing of the experiment", "[options]") {
  const std::set<std::string> may_change = {"steps",  "threads",  "grad-accum",  "reduction",  "shard-optimizer",  "eval-every",  "log-every",  "keep",
                                            "target", "target-patience", "on-nan", "probe-every", "tensorboard", "report"};
  for (const TrainOption& o : train_options()) {
    INFO(o.flag);
    CHECK(resume_may_change(o.flag) == (may_change.count(o.flag) > 0));
  }
  CHECK_FALSE(resume_may_change("no-such-option"));
}

TEST_CASE("every choice's name reads back as the choice, and an unknown name is refused listing the choices", "[options]") {
  for (const auto& [value, name] : choice_names(Arch{})) CHECK(choice_named<Arch>(name_of(value)) == value);
  for (const auto& [value, name] : choice_names(Positional{})) CHECK(choice_named<Positional>(name) == value);
  for (const auto& [value, name] : choice_names(Norm{})) CHECK(choice_named<Norm>(name) == value);
  for (const auto& [value, name] : choice_names(InitScheme{})) CHECK(choice_named<InitScheme>(name) == value);
  CHECK(name_of(InitScheme::automatic) == "auto");
  CHECK_THROWS_WITH(parse_choice<Norm>("norm", "mid"), "norm must be one of 'post', 'pre', got 'mid'");
}

TEST_CASE("the rope rule is one check, named by JSON key or by flag: an odd query/key width per head is refused",
          "[options]") {
  TransformerConfig c;
  c.positional = Positional::rope;
  c.d_model = 30;
  c.n_heads = 2;  // d_k = 15
  CHECK_THROWS_WITH(check_rope_width(c, Naming::json), Catch::Contains("positional 'rope'") && Catch::Contains("d_k = 15"));
  CHECK_THROWS_WITH(check_rope_width(c, Naming::flag), Catch::Contains("--positional rope") && Catch::Contains("got 15"));
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("d_k = 15"));
  c.parameter_free_attention = true;  // one head over the whole width: 30 rotates
  CHECK_NOTHROW(check_rope_width(c, Naming::json));
  c.parameter_free_attention = false;
  c.positional = Positional::sinusoidal;  // nothing rotates
  CHECK_NOTHROW(check_rope_width(c, Naming::json));
  c.positional = Positional::rope;
  c.d_k = 4;  // an explicit even width
  CHECK_NOTHROW(check_rope_width(c, Naming::flag));
}
