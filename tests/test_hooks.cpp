// The hook-point seam (framework/nn/hook_points.h) on every model kind: the
// names and their order, record and replace, a head's output ablated through
// the seam against the same head's columns of out_proj zeroed, refusals.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/nn/multi_head_attention.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"

using namespace attnlab;

namespace {

struct Kind {
  std::string arch;
  Norm norm;
  Positional positional;
};

std::string describe(const Kind& k) {
  return k.arch + (k.norm == Norm::pre ? " pre-LN" : " post-LN") +
         (k.positional == Positional::rope ? " rope" : "");
}

// Every model kind, in both norm arrangements; rope takes attention's unfused path.
std::vector<Kind> every_kind() {
  std::vector<Kind> kinds;
  for (const std::string arch : {"encoder", "decoder", "seq2seq"})
    for (Norm norm : {Norm::pre, Norm::post}) kinds.push_back({arch, norm, Positional::sinusoidal});
  kinds.push_back({"decoder", Norm::pre, Positional::rope});
  return kinds;
}

std::unique_ptr<SequenceModel> model_of(const Kind& k) {
  TransformerConfig c = testing::model_config(k.arch, 12, 16, 16, 4, 2, 32);
  c.norm = k.norm;
  c.positional = k.positional;
  return make_model(c, 11);
}

IntTensor ids(Shape shape, std::vector<int32_t> values) {
  IntTensor t(std::move(shape));
  t.data = std::move(values);
  return t;
}

// Two sequences, the second padded, in the fields the kind reads.
ModelInput input_for(const std::string& arch) {
  ModelInput in;
  if (arch != "decoder") {
    in.src = ids({2, 5}, {4, 5, 6, 7, 8, 9, 10, 11, 0, 0});
    in.src_pad = Tensor::from({2, 5}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1});
  }
  if (arch != "encoder") {
    in.tgt_in = ids({2, 4}, {1, 6, 7, 8, 1, 9, 10, 0});
    in.tgt_pad = Tensor::from({2, 4}, {0, 0, 0, 0, 0, 0, 0, 1});
  }
  return in;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

}  // namespace

TEST_CASE("hook names: each stack's embed, every block's points in forward order, ln_final, logits", "[hooks]") {
  auto decoder = model_of({"decoder", Norm::pre, Positional::sinusoidal});
  std::vector<std::string> expected = {"embed"};
  for (const std::string b : {"blocks.0.", "blocks.1."})
    for (const std::string p : {"resid_pre", "attn.scores", "attn.pattern", "attn.z", "attn.out", "resid_mid",
                                "mlp.hidden", "mlp.out", "resid_post"})
      expected.push_back(b + p);
  expected.push_back("ln_final");
  expected.push_back("logits");
  CHECK(decoder->hooks().names() == expected);
  CHECK(model_of({"encoder", Norm::post, Positional::sinusoidal})->hooks().names() == expected);

  const auto s2s = model_of({"seq2seq", Norm::pre, Positional::sinusoidal});
  const std::vector<std::string>& names = s2s->hooks().names();
  REQUIRE(names.size() == (1 + 2 * 9 + 1) + (1 + 2 * 14 + 1) + 1);
  CHECK(names.front() == "encoder.embed");
  CHECK(names[20] == "decoder.embed");
  CHECK(names[21] == "decoder.blocks.0.resid_pre");
  CHECK(names[22] == "decoder.blocks.0.self_attn.scores");
  CHECK(names[27] == "decoder.blocks.0.cross_attn.scores");
  CHECK(names[31] == "decoder.blocks.0.resid_mid_cross");
  CHECK(names.back() == "logits");
  CHECK(s2s->hooks().layout("decoder.blocks.0.cross_attn.pattern") == "B, h, T_q, T_k");
  CHECK(s2s->residual_stream_points() ==
        std::vector<std::string>{"encoder.embed", "encoder.blocks.0.resid_post", "encoder.blocks.1.resid_post",
                                 "decoder.embed", "decoder.blocks.0.resid_post", "decoder.blocks.1.resid_post"});
}

TEST_CASE("a forward passes every hook point once, in the order of names(), with nothing hooked after",
          "[hooks]") {
  for (const Kind& kind : every_kind()) {
    INFO(describe(kind));
    auto model = model_of(kind);
    InferenceGuard guard(*model);
    std::vector<std::string> seen;
    std::vector<int64_t> ids;
    for (const std::string& name : model->hooks().names())
      ids.push_back(model->hooks().observe(name, [&seen](const std::string& n, const Var&) { seen.push_back(n); }));
    model->forward(input_for(kind.arch));
    CHECK(seen == model->hooks().names());
    for (int64_t id : ids) model->hooks().remove(id);
    CHECK(model->hooks().empty());
  }
}

TEST_CASE("recording every hook point, then replacing each by its record, gives bitwise the same logits",
          "[hooks]") {
  for (const Kind& kind : every_kind()) {
    INFO(describe(kind));
    auto model = model_of(kind);
    InferenceGuard guard(*model);
    const ModelInput in = input_for(kind.arch);
    const Tensor plain = model->forward(in).value();
    HookTable& hooks = model->hooks();
    std::map<std::string, Tensor> recorded;
    std::vector<int64_t> observers;
    for (const std::string& name : hooks.names())
      observers.push_back(
          hooks.observe(name, [&recorded](const std::string& n, const Var& v) { recorded[n] = v.value(); }));
    const Tensor all = model->forward(in).value();
    REQUIRE(recorded.size() == hooks.names().size());
    // Observing the scores takes attention's composed path: the same function, other roundings.
    CHECK(max_abs_diff(all, plain) < 1e-5);
    for (const std::string& name : hooks.names()) {
      INFO(name);
      const Tensor record = recorded.at(name);
      const int64_t id = hooks.replace(name, [record](const std::string&, const Var&) { return Var(record); });
      CHECK(bitwise_equal(model->forward(in).value(), all));
      hooks.remove(id);
    }
    for (int64_t id : observers) hooks.remove(id);
    REQUIRE(hooks.empty());
    CHECK(bitwise_equal(model->forward(in).value(), plain));  // nothing hooked: no bit changed
  }
}

TEST_CASE("observing only the attention pattern keeps the fused kernel: logits bitwise unhooked", "[hooks]") {
  for (const Kind& kind : every_kind()) {
    INFO(describe(kind));
    auto model = model_of(kind);
    InferenceGuard guard(*model);
    const ModelInput in = input_for(kind.arch);
    const Tensor plain = model->forward(in).value();
    Tensor pattern;
    const std::string layer = kind.arch == "seq2seq" ? "decoder.blocks.1.self_attn" : "blocks.1.attn";
    model->hooks().observe(layer + ".pattern", [&pattern](const std::string&, const Var& w) { pattern = w.value(); });
    CHECK(bitwise_equal(model->forward(in).value(), plain));
    REQUIRE(pattern.dim() == 4);
    CHECK(pattern.size(1) == 4);  // heads
  }
}

TEST_CASE("zeroing one head's z through the seam equals zeroing that head's columns of out_proj", "[hooks]") {
  const int64_t head = 2, d_v = 4;  // d = 16, h = 4
  for (const Kind& kind : every_kind()) {
    for (const std::string& layer : kind.arch == "seq2seq"
                                       ? std::vector<std::string>{"encoder.blocks.1.attn", "decoder.blocks.0.self_attn",
                                                                  "decoder.blocks.1.cross_attn"}
                                       : std::vector<std::string>{"blocks.0.attn", "blocks.1.attn"}) {
      INFO(describe(kind) << ", " << layer);
      const ModelInput in = input_for(kind.arch);
      auto hooked = model_of(kind);
      InferenceGuard guard(*hooked);
      const Tensor plain = hooked->forward(in).value();
      hooked->hooks().replace(layer + ".z", [](const std::string&, const Var& z) {
        Tensor t = z.value();  // (B, T_q, h·d_v)
        const int64_t width = t.size(2);
        for (int64_t row = 0; row < t.numel() / width; ++row)
          for (int64_t j = head * d_v; j < (head + 1) * d_v; ++j) t[row * width + j] = 0;
        return Var(t);
      });
      const Tensor ablated = hooked->forward(in).value();

      auto edited = model_of(kind);  // the same seed: the same weights
      InferenceGuard edited_guard(*edited);
      Tensor& w = edited->parameter(layer + ".out_proj.weight").value();  // (d, h·d_v)
      for (int64_t r = 0; r < w.size(0); ++r)
        for (int64_t j = head * d_v; j < (head + 1) * d_v; ++j) w[r * w.size(1) + j] = 0;
      const Tensor reference = edited->forward(in).value();
      CHECK(max_abs_diff(ablated, plain) > 1e-4);  // the head mattered
      CHECK(max_abs_diff(ablated, reference) < 1e-5);
    }
  }
}

TEST_CASE("an unknown hook name is refused naming it, and a replacement of another shape is refused", "[hooks]") {
  auto model = model_of({"decoder", Norm::pre, Positional::sinusoidal});
  HookTable& hooks = model->hooks();
  auto observe_nothing = [](const std::string&, const Var&) {};
  CHECK_THROWS_WITH(hooks.observe("blocks.2.attn.pattern", observe_nothing),
                    Catch::Contains("no hook point named 'blocks.2.attn.pattern'"));
  CHECK_THROWS_AS(hooks.replace("blocks.0.attn.hook_pattern", [](const std::string&, const Var& v) { return v; }),
                  ValueError);
  CHECK_THROWS_AS(hooks.layout("embeddings"), ValueError);
  CHECK(hooks.empty());
  hooks.replace("blocks.0.mlp.hidden", [](const std::string&, const Var&) { return Var(Tensor(Shape{1, 2})); });
  InferenceGuard guard(*model);
  CHECK_THROWS_WITH(model->forward(input_for("decoder")),
                    Catch::Contains("hook on 'blocks.0.mlp.hidden' returned (1, 2) for an activation of shape"));
}
