// The option tables (models/model_options.h, training/settings_options.h):
// each option declared once, and what reads them agrees with them.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <type_traits>

#include "models/config.h"
#include "models/model_options.h"
#include "models/model_rules.h"
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
                                            "target", "target-patience", "on-nan", "probe-every", "noise-scale", "tensorboard", "report",
                                            "probe-sharpness", "sharpness-tol", "sharpness-iters", "probe-induction"};
  for (const TrainOption& o : train_options()) {
    INFO(o.flag);
    CHECK(resume_may_change(o.flag) == (may_change.count(o.flag) > 0));
  }
  CHECK_FALSE(resume_may_change("no-such-option"));
}

namespace {

// Every value of E has a distinct name that reads back as the value.
template <class E>
void check_round_trip() {
  std::set<std::string> names;
  for (const auto& c : choice_names(E{})) {
    INFO(c.name);
    CHECK(choice_named<E>(c.name) == c.value);
    CHECK(name_of(c.value) == c.name);
    CHECK(names.insert(c.name).second);
  }
}

}  // namespace

TEST_CASE("every choice's name reads back as the choice, and an unknown name is refused listing the choices", "[options]") {
  check_round_trip<Arch>();
  check_round_trip<Positional>();
  check_round_trip<Norm>();
  check_round_trip<InitScheme>();
  check_round_trip<Layout>();
  check_round_trip<Activation>();
  check_round_trip<Precision>();
  check_round_trip<Tokenize>();
  check_round_trip<ModularOp>();
  check_round_trip<OptimizerKind>();
  check_round_trip<ScheduleKind>();
  check_round_trip<OnNan>();
  CHECK(name_of(InitScheme::automatic) == "auto");
  CHECK_THROWS_WITH(parse_choice<Norm>("norm", "mid"), "norm must be one of 'none', 'post', 'pre', got 'mid'");
  CHECK_THROWS_WITH(parse_choice<Norm>("--norm", "mid", Naming::flag), "--norm must be one of none, post, pre, got 'mid'");
}

TEST_CASE("a choice option's --help lists every value of its table, in the table's order", "[options]") {
  CHECK(choices_help<Norm>() == "pre (pre-LN) | post (post-LN, as in Vaswani et al.) | none (no LayerNorm: each "
                                 "sublayer x + f(x), no final norm)");
  CHECK(help_with_choices<Activation>("feed-forward activation: {}") == "feed-forward activation: relu | gelu");
  CHECK(help_with_choices<Activation>("some only") == "some only");
  TrainSettings s;
  int choices = 0;
  for (const TrainOption& o : train_options()) {
    INFO(o.flag);
    std::visit(
        [&](auto* field) {
          using T = std::remove_pointer_t<decltype(field)>;
          if constexpr (std::is_enum_v<T>) {
            ++choices;
            CHECK(std::string(o.help).find("{}") != std::string::npos);  // where the table's values go
            const std::string help = help_with_choices<T>(o.help);
            for (const auto& c : choice_names(T{})) CHECK_THAT(help, Catch::Contains(c.name));
          }
        },
        o.field(s));
  }
  CHECK(choices == 13);  // model, positional, norm, activation, init, layout, tokenize, operation, optimizer, schedule,
                         // precision, on-nan, reduction
}

TEST_CASE("a cross-field rule of the model is written once and worded in flags or in JSON keys", "[options]") {
  TransformerConfig c;
  c.d_model = 64;
  c.n_heads = 3;
  CHECK_THROWS_WITH(check_model_rules(c, Naming::flag),
                    "--heads 3 does not divide --d-model 64; choose a divisor, or set --d-k and --d-v");
  CHECK_THROWS_WITH(check_model_rules(c, Naming::json),
                    "n_heads 3 does not divide d_model 64; choose a divisor, or set d_k and d_v");
  CHECK_THROWS_WITH(c.validate(), "n_heads 3 does not divide d_model 64; choose a divisor, or set d_k and d_v");
  c = TransformerConfig();
  c.parameter_free_attention = true;
  c.d_k = 8;
  CHECK_THROWS_WITH(check_model_rules(c, Naming::flag),
                    "--d-k and --d-v do not apply to --parameter-free-attention (one head over the whole width)");
  CHECK_THROWS_WITH(check_model_rules(c, Naming::json),
                    "d_k and d_v do not apply to parameter_free_attention (one head over the whole width)");
  c = TransformerConfig();
  c.attn_scale = "banana";
  CHECK_THROWS_WITH(check_model_rules(c, Naming::flag),
                    "--attn-scale must be sqrt, none, linear or a positive number, got 'banana'");
  CHECK_THROWS_WITH(check_model_rules(c, Naming::json),
                    "attn_scale must be 'sqrt', 'none', 'linear' or a positive number, got 'banana'");
  c = TransformerConfig();
  c.random_positions = 64;
  c.positional = Positional::rope;
  CHECK_THROWS_WITH(check_model_rules(c, Naming::flag),
                    "--random-positions applies to --positional sinusoidal or learned, not rope");
  CHECK_THROWS_WITH(check_model_rules(c, Naming::json),
                    "random_positions applies to positional 'sinusoidal' or 'learned', not 'rope'");
  c = TransformerConfig();
  c.layout = Layout::bare;
  CHECK_THROWS_WITH(check_model_rules(c, Naming::flag),
                    "--layout bare lays out a prompt and its answer in one sequence: it applies to --model decoder, "
                    "got --model encoder");
  CHECK_THROWS_WITH(check_model_rules(c, Naming::json),
                    "layout 'bare' lays out a prompt and its answer in one sequence: it applies to arch 'decoder', "
                    "got arch 'encoder'");
  c.arch = Arch::decoder;
  CHECK_NOTHROW(check_model_rules(c, Naming::flag));
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
