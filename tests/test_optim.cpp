// Optimizers, gradient clipping and lr schedules: parity with PyTorch through
// the fixture tests/data/optim_reference.json (written by
// scripts/pytorch/torch_optim_reference.py, in float64), weight-decay exclusions,
// exact state save/restore, and errors for bad settings.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "framework/io/safetensors.h"
#include "framework/optim/optim.h"
#include "framework/optim/optim_rules.h"

using namespace attnlab;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

const json& reference() {
  static const json data = [] {
    const std::string path = std::string(ATTNLAB_TEST_DATA) + "/optim_reference.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("missing fixture " + path + " (run scripts/pytorch/torch_optim_reference.py)");
    return json::parse(in);
  }();
  return data;
}

struct Fixture {
  NamedParams params;
  std::vector<Tensor> noise;
  std::vector<bool> has_grad;
};

// Fresh parameters with the fixture's initial values (exact in float32).
Fixture make_fixture_params() {
  Fixture f;
  for (const json& p : reference()["params"]) {
    const Shape shape = p["shape"].get<Shape>();
    std::vector<Real> init, noise;
    for (double v : p["init"]) init.push_back(static_cast<Real>(v));
    for (double v : p["noise"]) noise.push_back(static_cast<Real>(v));
    f.params.emplace_back(p["name"].get<std::string>(), Var(Tensor::from(shape, init), true));
    f.noise.push_back(Tensor::from(shape, noise));
    f.has_grad.push_back(p["has_grad"].get<bool>());
  }
  return f;
}

// The fixture's gradient: g = 2 p + noise, from the current parameters.
void set_grads(Fixture& f) {
  for (size_t i = 0; i < f.params.size(); ++i) {
    if (!f.has_grad[i]) continue;
    Var& p = f.params[i].second;
    Tensor& g = p.node()->grad_buffer();
    g.flat() = 2 * p.value().flat() + f.noise[i].flat();
  }
}

OptimizerConfig config_from(const json& c) {
  OptimizerConfig cfg;
  cfg.kind = parse_choice<OptimizerKind>("name", c["name"].get<std::string>());
  cfg.lr = c["lr"];
  cfg.momentum = c["momentum"];
  cfg.beta1 = c["beta1"];
  cfg.beta2 = c["beta2"];
  cfg.eps = c["eps"];
  cfg.weight_decay = c["weight_decay"];
  cfg.nesterov = c["nesterov"];
  cfg.decay_all = c["decay_all"];
  return cfg;
}

// Tolerance for float32 trajectories against the float64 reference:
// |got - ref| <= 1e-6 * max(|ref|, 1), i.e. 1e-6 relative for values of
// magnitude >= 1 and 1e-6 absolute below (the values here are O(1); a
// purely relative bound would be meaningless where a coordinate passes
// near 0). float32 rounds at 6e-8 relative, and a step adds a few roundings,
// so a few steps stay well inside; a wrong term (a missing bias correction,
// decay on an excluded parameter, lr applied one step late) is off by 1e-3
// or more.
constexpr double kParityTol = 1e-6;

double max_scaled_error(const Fixture& f, const json& expected) {
  double worst = 0;
  for (const auto& [name, var] : f.params) {
    const json& ref = expected.at(name);
    REQUIRE(static_cast<int64_t>(ref.size()) == var.numel());
    for (int64_t i = 0; i < var.numel(); ++i) {
      const double r = ref[static_cast<size_t>(i)];
      worst = std::max(worst, std::abs(static_cast<double>(var.value()[i]) - r) / std::max(std::abs(r), 1.0));
    }
  }
  return worst;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(Real) * a.numel()) == 0;
}

NamedParams two_params(Real w, Real b) {
  return {{"fc.weight", Var(Tensor({2, 3}, w), true)}, {"fc.bias", Var(Tensor({3}, b), true)}};
}

}  // namespace

TEST_CASE("SGD, momentum, Nesterov, Adam, Adam+L2 and AdamW follow torch.optim's trajectories", "[optim]") {
  for (const json& c : reference()["optimizers"]) {
    DYNAMIC_SECTION(c["label"].get<std::string>()) {
      Fixture f = make_fixture_params();
      auto opt = make_optimizer(config_from(c["config"]), f.params);
      int step = 0;
      for (const json& s : c["steps"]) {
        ++step;
        set_grads(f);
        opt->step();
        INFO("step " << step);
        CHECK(max_scaled_error(f, s["params"]) <= kParityTol);
      }
      REQUIRE(opt->steps() == 3);
    }
  }
}

TEST_CASE("lr schedules give torch LambdaLR's lr per step and drive SGD as torch does", "[optim]") {
  for (const json& c : reference()["schedules"]) {
    DYNAMIC_SECTION(c["label"].get<std::string>()) {
      const json& s = c["schedule"];
      ScheduleConfig sc;
      sc.kind = parse_choice<ScheduleKind>("name", s["name"].get<std::string>());
      sc.warmup = s["warmup"];
      sc.total_steps = s["total_steps"];
      sc.min_lr = s["min_lr"];
      sc.d_model = s["d_model"];
      const double base = c["base_lr"];
      Fixture f = make_fixture_params();
      auto opt = make_optimizer(config_from(c["optimizer"]), f.params);
      int64_t k = 0;
      for (const json& st : c["steps"]) {
        ++k;
        const double lr = scheduled_lr(sc, base, k);
        INFO("step " << k);
        // Both sides compute the lr in double with a few operations: 1e-12
        // relative (plus 1e-15 absolute where it reaches 0) leaves room only for rounding.
        CHECK(std::abs(lr - st["lr"].get<double>()) <= 1e-12 * std::abs(lr) + 1e-15);
        opt->set_lr(lr);
        set_grads(f);
        opt->step();
        CHECK(max_scaled_error(f, st["params"]) <= kParityTol);
      }
    }
  }
}

TEST_CASE("clip_grad_norm returns torch's norm before clipping and scales as torch does", "[optim]") {
  for (const json& c : reference()["clip"]) {
    Fixture f = make_fixture_params();
    set_grads(f);
    std::vector<Var> vars;
    for (const auto& p : f.params) vars.push_back(p.second);
    const double max_norm = c["max_norm"];
    const double norm = clip_grad_norm(vars, max_norm);
    INFO("max_norm " << max_norm);
    // The float32 gradients are exact (multiples of 1/64) and the sum of
    // squares is accumulated in double: only double rounding remains.
    CHECK(std::abs(norm - c["norm"].get<double>()) <= 1e-12 * norm);
    for (const auto& [name, var] : f.params) {
      if (!c["grads"].contains(name)) {
        CHECK_FALSE(var.has_grad());
        continue;
      }
      const json& g = c["grads"][name];
      for (int64_t i = 0; i < var.numel(); ++i) {
        const double r = g[static_cast<size_t>(i)];
        // One float32 multiplication by the clip factor: 1e-6 relative (about 8 ulp).
        CHECK(std::abs(var.grad()[i] - r) <= 1e-6 * std::max(std::abs(r), 1.0));
      }
    }
  }
}

TEST_CASE("clip_grad_norm leaves gradients alone below max_norm or when the norm is not finite", "[optim]") {
  Var a(Tensor::from({2}, {3, 4}), true);
  a.node()->grad_buffer() = Tensor::from({2}, {3, 4});
  REQUIRE(clip_grad_norm({a}, 10) == Approx(5).epsilon(1e-12));
  REQUIRE(a.grad()[0] == 3);
  REQUIRE(clip_grad_norm({a}, 1) == Approx(5).epsilon(1e-12));
  REQUIRE(a.grad()[1] == Approx(4 / (5 + 1e-6)).epsilon(1e-6));

  a.grad()[0] = std::numeric_limits<Real>::infinity();
  REQUIRE(std::isinf(clip_grad_norm({a}, 1)));
  REQUIRE(std::isinf(a.grad()[0]));
  REQUIRE_THROWS_WITH(clip_grad_norm({a}, 0), Contains("max_norm") && Contains("0"));
}

TEST_CASE("the default decay rule excludes biases, LayerNorm and embedding parameters by name", "[optim]") {
  for (const char* name : {"fc.bias", "blocks.0.attn.q_proj.bias", "blocks.1.ln1.weight", "blocks.1.ln2.bias",
                           "ln_f.weight", "encoder.ln_f.weight", "decoder.blocks.0.ln3.weight", "tok_emb.weight",
                           "pos_emb.weight", "bias"}) {
    INFO(name);
    CHECK(default_no_decay(name));
  }
  for (const char* name : {"fc.weight", "blocks.0.attn.q_proj.weight", "blocks.0.ff.fc1.weight", "head.weight",
                           "kiln.weight", "lnx.weight", "biases.weight"}) {
    INFO(name);
    CHECK_FALSE(default_no_decay(name));
  }
}

TEST_CASE("AdamW and SGD decay only the decayed names by default, all names with decay_all", "[optim]") {
  // With zero gradients an AdamW step is pure decay: p *= 1 - lr * wd, and
  // excluded parameters must stay bit-for-bit unchanged.
  for (const bool decay_all : {false, true}) {
    for (const char* name : {"adamw", "sgd"}) {
      DYNAMIC_SECTION(name << (decay_all ? " decay_all" : " default")) {
        NamedParams params = {{"fc.weight", Var(Tensor({3}, 2), true)},
                              {"fc.bias", Var(Tensor({3}, 2), true)},
                              {"blocks.0.ln1.weight", Var(Tensor({3}, 2), true)},
                              {"tok_emb.weight", Var(Tensor({3}, 2), true)}};
        for (auto& p : params) p.second.node()->grad_buffer();  // zeros
        OptimizerConfig cfg;
        cfg.kind = parse_choice<OptimizerKind>("optimizer", name);
        cfg.lr = 0.1;
        cfg.weight_decay = 0.5;
        cfg.decay_all = decay_all;
        auto opt = make_optimizer(cfg, params);
        opt->step();
        const Real decayed = Real(2) * (1 - Real(0.1 * 0.5));  // both SGD (p -= lr*wd*p) and AdamW
        CHECK(params[0].second.value()[0] == Approx(decayed).epsilon(1e-6));
        for (size_t i = 1; i < params.size(); ++i) {
          INFO(params[i].first);
          if (decay_all) CHECK(params[i].second.value()[0] == Approx(decayed).epsilon(1e-6));
          else CHECK(params[i].second.value()[0] == 2);
          CHECK(opt->weight_decay_of(params[i].first) == (decay_all ? 0.5 : 0.0));
        }
      }
    }
  }
}

TEST_CASE("a parameter large enough to be updated in parallel chunks gets every element right", "[optim]") {
  // 20 chunks of 2048 plus a ragged end: the parallel path and chunk edges.
  const int64_t n = 20 * 2048 + 3;
  Tensor init({n}), g({n});
  for (int64_t i = 0; i < n; ++i) {
    init[i] = static_cast<Real>(std::sin(0.01 * static_cast<double>(i)) + 1.5);
    g[i] = static_cast<Real>(std::cos(0.013 * static_cast<double>(i)));
  }
  for (const char* name : {"sgd", "adamw"}) {
    DYNAMIC_SECTION(name) {
      NamedParams params = {{"big.weight", Var(init, true)}};
      params[0].second.node()->grad_buffer() = g;
      OptimizerConfig cfg;
      cfg.kind = parse_choice<OptimizerKind>("optimizer", name);
      cfg.lr = 0.01;
      cfg.momentum = std::string(name) == "sgd" ? 0.9 : 0;
      cfg.weight_decay = 0.1;
      auto opt = make_optimizer(cfg, params);
      opt->step();
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double p = init[i], gi = g[i];
        // First step: SGD buf = g + wd p; Adam m_hat = g, v_hat = g^2.
        const double expected = std::string(name) == "sgd" ? p - 0.01 * (gi + 0.1 * p)
                                                           : p * (1 - 0.01 * 0.1) - 0.01 * gi / (std::abs(gi) + 1e-8);
        worst = std::max(worst, std::abs(params[0].second.value()[i] - expected));
      }
      // One float32 update of O(1) values: a few ulp, far below 1e-6.
      CHECK(worst <= 1e-6);
    }
  }
}

TEST_CASE("a parameter without a gradient is skipped and keeps its own Adam step count", "[optim]") {
  NamedParams params = two_params(1, 1);
  Var w = params[0].second, b = params[1].second;
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::adam;
  cfg.lr = 0.01;
  cfg.weight_decay = 0;
  auto opt = make_optimizer(cfg, params);
  w.node()->grad_buffer().fill_(1);
  opt->step();
  opt->step();
  REQUIRE(b.value()[0] == 1);  // untouched: no gradient
  // b's first update, at global step 3, must use bias correction for t = 1:
  // m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) = lr.
  b.node()->grad_buffer().fill_(Real(0.3));
  opt->step();
  CHECK(b.value()[0] == Approx(1 - 0.01).epsilon(1e-6));
  const NamedTensors state = opt->state();
  auto entry = [&](const std::string& n) {
    for (const auto& [k, t] : state)
      if (k == n) return t.item();
    FAIL("no state entry " << n);
    return Real(0);
  };
  CHECK(entry("step") == 3);
  CHECK(entry("step.fc.weight") == 3);
  CHECK(entry("step.fc.bias") == 1);
}

TEST_CASE("optimizer state restored into a fresh optimizer gives a bitwise identical next step", "[optim]") {
  for (const char* name : {"sgd", "adam", "adamw"}) {
    DYNAMIC_SECTION(name) {
      OptimizerConfig cfg;
      cfg.kind = parse_choice<OptimizerKind>("optimizer", name);
      cfg.lr = 0.05;
      cfg.momentum = std::string(name) == "sgd" ? 0.9 : 0;
      cfg.weight_decay = 0.1;
      Fixture a = make_fixture_params();
      auto opt_a = make_optimizer(cfg, a.params);
      for (int i = 0; i < 2; ++i) {
        set_grads(a);
        opt_a->step();
      }
      // Through a safetensors round trip, as a checkpoint would (F32 is exact for float32).
      const NamedTensors state_a = opt_a->state();
      TensorRefs refs;
      for (const auto& [k, t] : state_a) refs.emplace_back(k, &t);
      const SafetensorsData saved = decode_safetensors(encode_safetensors(refs), "state");

      Fixture b = make_fixture_params();
      for (size_t i = 0; i < b.params.size(); ++i) b.params[i].second.value() = a.params[i].second.value();
      auto opt_b = make_optimizer(cfg, b.params);
      opt_b->load_state(saved.tensors);
      REQUIRE(opt_b->steps() == 2);
      set_grads(a);
      set_grads(b);
      opt_a->step();
      opt_b->step();
      for (size_t i = 0; i < a.params.size(); ++i) {
        INFO(a.params[i].first);
        CHECK(bitwise_equal(a.params[i].second.value(), b.params[i].second.value()));
      }
      const NamedTensors sa = opt_a->state(), sb = opt_b->state();
      REQUIRE(sa.size() == sb.size());
      for (size_t i = 0; i < sa.size(); ++i) CHECK(bitwise_equal(sa[i].second, sb[i].second));
    }
  }
}

TEST_CASE("load_state names a missing, unexpected or mismatched entry and changes nothing", "[optim]") {
  NamedParams params = two_params(1, 1);
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::adamw;
  auto opt = make_optimizer(cfg, params);
  const NamedTensors good = opt->state();

  NamedTensors missing(good.begin(), good.end() - 1);
  REQUIRE_THROWS_WITH(opt->load_state(missing), Contains("missing") && Contains(good.back().first));

  NamedTensors extra = good;
  extra.emplace_back("momentum.fc.weight", Tensor({2, 3}));
  REQUIRE_THROWS_WITH(opt->load_state(extra), Contains("unexpected") && Contains("momentum.fc.weight"));

  NamedTensors wrong_shape = good;
  for (auto& [k, t] : wrong_shape)
    if (k == "exp_avg.fc.weight") t = Tensor({3, 2}, 7);
  REQUIRE_THROWS_WITH(opt->load_state(wrong_shape), Contains("exp_avg.fc.weight") && Contains("(3, 2)"));

  NamedTensors bad_step = good;
  bad_step[0].second = Tensor::from({1}, {Real(2.5)});
  REQUIRE_THROWS_WITH(opt->load_state(bad_step), Contains("step") && Contains("2.5"));
  REQUIRE(opt->steps() == 0);

  // An SGD state does not load into AdamW.
  cfg.kind = OptimizerKind::sgd;
  cfg.momentum = 0.9;
  auto sgd = make_optimizer(cfg, params);
  REQUIRE_THROWS_WITH(opt->load_state(sgd->state()), Contains("missing"));
}

TEST_CASE("make_optimizer rejects bad settings, naming the value", "[optim]") {
  NamedParams params = two_params(1, 1);
  auto with = [](auto change) {
    OptimizerConfig c;
    change(c);
    return c;
  };
  REQUIRE_THROWS_WITH(parse_choice<OptimizerKind>("--optimizer", "adagrad", Naming::flag),
                      "--optimizer must be one of adam, adamw, sgd, got 'adagrad'");
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.lr = 0; }), params), Contains("lr") && Contains("0"));
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.lr = -0.5; }), params), Contains("-0.5"));
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.lr = std::nan(""); }), params), Contains("lr"));
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.beta1 = 1; }), params), Contains("beta1") && Contains("1"));
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.beta2 = -0.25; }), params),
                      Contains("beta2") && Contains("-0.25"));
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.eps = 0; }), params), Contains("eps"));
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.weight_decay = -0.125; }), params),
                      Contains("weight_decay") && Contains("-0.125"));
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.kind = OptimizerKind::sgd; c.momentum = -0.5; }), params),
                      Contains("momentum") && Contains("-0.5"));
  REQUIRE_THROWS_WITH(make_optimizer(with([](auto& c) { c.kind = OptimizerKind::sgd; c.nesterov = true; }), params),
                      Contains("nesterov"));
  REQUIRE_THROWS_AS(make_optimizer(OptimizerConfig{}, {}), ValueError);
  REQUIRE_THROWS_WITH(make_optimizer(OptimizerConfig{}, {{"a", Var()}}), Contains("'a'"));
  NamedParams twice = {{"w", params[0].second}, {"w", params[1].second}};
  REQUIRE_THROWS_WITH(make_optimizer(OptimizerConfig{}, twice), Contains("'w'") && Contains("twice"));
  auto opt = make_optimizer(OptimizerConfig{}, params);
  REQUIRE_THROWS_AS(opt->set_lr(-1), ValueError);
  opt->set_lr(0);  // a schedule may reach 0
  REQUIRE(opt->lr() == 0);
}

TEST_CASE("schedules hit their documented values at warmup, the end and beyond", "[optim]") {
  ScheduleConfig c;
  REQUIRE(scheduled_lr(c, 0.1, 1) == 0.1);  // constant, no warmup
  c.warmup = 4;
  REQUIRE(scheduled_lr(c, 0.1, 1) == Approx(0.025).epsilon(1e-15));
  REQUIRE(scheduled_lr(c, 0.1, 4) == 0.1);
  c = ScheduleConfig{ScheduleKind::cosine, 10, 110, 0.001, 0};
  REQUIRE(scheduled_lr(c, 0.1, 10) == Approx(0.1).epsilon(1e-15));
  REQUIRE(scheduled_lr(c, 0.1, 60) == Approx(0.0505).epsilon(1e-12));  // halfway: the mean of base and min
  REQUIRE(scheduled_lr(c, 0.1, 110) == Approx(0.001).epsilon(1e-12));
  REQUIRE(scheduled_lr(c, 0.1, 1000) == Approx(0.001).epsilon(1e-12));
  c.kind = ScheduleKind::linear;
  REQUIRE(scheduled_lr(c, 0.1, 60) == Approx(0.0505).epsilon(1e-12));
  c = ScheduleConfig{ScheduleKind::noam, 4000, 0, 0, 512};
  // Peak at step = warmup: lr_scale / sqrt(d_model * warmup).
  REQUIRE(scheduled_lr(c, 1.0, 4000) == Approx(1 / std::sqrt(512.0 * 4000)).epsilon(1e-12));
  REQUIRE(scheduled_lr(c, 1.0, 3999) < scheduled_lr(c, 1.0, 4000));
  REQUIRE(scheduled_lr(c, 1.0, 4001) < scheduled_lr(c, 1.0, 4000));
}

TEST_CASE("schedules reject bad settings, naming the value", "[optim]") {
  REQUIRE_THROWS_WITH(parse_choice<ScheduleKind>("--schedule", "step", Naming::flag),
                      "--schedule must be one of constant, cosine, linear, noam, got 'step'");
  REQUIRE_THROWS_WITH(scheduled_lr(ScheduleConfig{}, 0.1, 0), Contains("step") && Contains("0"));
  REQUIRE_THROWS_WITH(scheduled_lr(ScheduleConfig{ScheduleKind::constant, -3, 0, 0, 0}, 0.1, 1), Contains("-3"));
  REQUIRE_THROWS_WITH(scheduled_lr(ScheduleConfig{ScheduleKind::cosine, 10, 10, 0, 0}, 0.1, 1),
                      Contains("total_steps") && Contains("10"));
  REQUIRE_THROWS_WITH(scheduled_lr(ScheduleConfig{ScheduleKind::linear, 0, 100, 0.5, 0}, 0.1, 1),
                      Contains("min_lr") && Contains("0.5"));
  REQUIRE_THROWS_WITH(scheduled_lr(ScheduleConfig{ScheduleKind::noam, 0, 0, 0, 64}, 1.0, 1), Contains("warmup"));
  REQUIRE_THROWS_WITH(scheduled_lr(ScheduleConfig{ScheduleKind::noam, 100, 0, 0, 0}, 1.0, 1), Contains("d_model"));
  REQUIRE_THROWS_WITH(scheduled_lr(ScheduleConfig{}, -1, 1), Contains("-1"));
}

TEST_CASE("an optimizer's or a schedule's cross-field rule is written once and worded in fields or in flags",
          "[optim][options]") {
  OptimizerConfig o;
  o.kind = OptimizerKind::sgd;
  o.nesterov = true;
  CHECK_THROWS_WITH(check_nesterov(o, Naming::flag), "--nesterov needs --momentum > 0");
  CHECK_THROWS_WITH(check_nesterov(o, Naming::json), "nesterov needs momentum > 0");
  CHECK_THROWS_WITH(validate(o), "nesterov needs momentum > 0");  // make_optimizer's check is the same rule
  o.momentum = 0.9;
  CHECK_NOTHROW(check_nesterov(o, Naming::flag));
  ScheduleConfig c{ScheduleKind::cosine, 0, 100, 1, 0};
  CHECK_THROWS_WITH(check_schedule_fields(c, 0.001, Naming::flag), "--min-lr must be in [0, --lr 0.001], got 1");
  CHECK_THROWS_WITH(check_schedule_fields(c, 0.001, Naming::json), "min_lr must be in [0, lr 0.001], got 1");
  CHECK_THROWS_WITH(scheduled_lr(c, 0.001, 1), "min_lr must be in [0, lr 0.001], got 1");
  c = ScheduleConfig{ScheduleKind::noam, 0, 0, 0, 64};
  CHECK_THROWS_WITH(check_schedule_fields(c, 1.0, Naming::flag), "--schedule noam needs --warmup > 0");
  CHECK_THROWS_WITH(check_schedule_fields(c, 1.0, Naming::json), "schedule noam needs warmup > 0");
  c.warmup = 10;
  CHECK_NOTHROW(check_schedule_fields(c, 1.0, Naming::flag));
}
