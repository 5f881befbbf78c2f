// What every intervention stands on (interventions/components.h,
// teacher_forced.h): the components' names, points and columns, the
// teacher-forced score against the loss op and greedy decoding, and the
// hand-built model (tests/hand_built_model.h) doing what it is built to do.
#include <catch2/catch.hpp>

#include "framework/error.h"
#include "framework/ops/loss.h"
#include "interventions/components.h"
#include "interventions/teacher_forced.h"
#include "tests/fixtures.h"
#include "tests/hand_built_model.h"
#include "training/evaluate.h"

using namespace attnlab;

namespace {

std::vector<std::string> names_of(const std::vector<Component>& components) {
  std::vector<std::string> out;
  for (const Component& k : components) out.push_back(k.name());
  return out;
}

}  // namespace

TEST_CASE("a seq2seq model's components are its heads, MLPs and blocks in forward order, named by their hook points") {
  TransformerConfig c = testing::model_config("seq2seq", 12, 16, 16, 2, 1, 32);
  const std::vector<Component> all = model_components(c);
  CHECK(names_of(all) == std::vector<std::string>{
                             "encoder.blocks.0.attn.h0", "encoder.blocks.0.attn.h1", "encoder.blocks.0.mlp",
                             "encoder.blocks.0", "decoder.blocks.0.self_attn.h0", "decoder.blocks.0.self_attn.h1",
                             "decoder.blocks.0.cross_attn.h0", "decoder.blocks.0.cross_attn.h1", "decoder.blocks.0.mlp",
                             "decoder.blocks.0"});
  CHECK(all[5].points(c) == std::vector<std::string>{"decoder.blocks.0.self_attn.z"});
  CHECK(all[8].points(c) == std::vector<std::string>{"decoder.blocks.0.mlp.out"});
  CHECK(all[9].points(c) == std::vector<std::string>{"decoder.blocks.0.self_attn.out", "decoder.blocks.0.cross_attn.out",
                                                      "decoder.blocks.0.mlp.out"});
  // Every point a component names is one the model passes.
  std::unique_ptr<SequenceModel> model = make_model(c, 3);
  for (const Component& k : all)
    for (const std::string& point : k.points(c)) CHECK_NOTHROW(model->hooks().layout(point));
}

TEST_CASE("components are found by name, and an unknown name is refused with what the model has") {
  TransformerConfig c = testing::model_config("decoder", 12, 16, 16, 4, 2, 32);
  const std::vector<Component> found = components_named(c, {"blocks.1.mlp", "blocks.0.attn.h3", "blocks.1"});
  CHECK(names_of(found) == std::vector<std::string>{"blocks.1.mlp", "blocks.0.attn.h3", "blocks.1"});
  CHECK(found[1].kind == ComponentKind::head);
  CHECK(found[1].head == 3);
  CHECK(found[2].kind == ComponentKind::layer);
  CHECK_THROWS_WITH(components_named(c, {"blocks.2.attn.h0"}),
                    "no component named 'blocks.2.attn.h0' (this model has blocks.0-1, heads h0-h3 in attn, mlp)");
  CHECK_THROWS_AS(components_named(c, {"blocks.0.attn.h4"}), ValueError);
}

TEST_CASE("a head's columns of z: h·d_v wide with d_v per head, the whole width without projections") {
  TransformerConfig c = testing::model_config("encoder", 12, 16, 16, 4, 1, 32);
  c.d_v = 3;
  CHECK(head_columns(c, 2).begin == 6);
  CHECK(head_columns(c, 2).width == 3);
  CHECK_THROWS_AS(head_columns(c, 4), ValueError);
  c.parameter_free_attention = true;
  CHECK(heads_per_attention(c) == 1);
  CHECK(head_columns(c, 0).width == 16);
}

TEST_CASE("the teacher-forced score is the loss op's cross-entropy and the argmax's accuracy") {
  Rng rng(5);
  Tensor logits({3, 4, 7});
  for (int64_t i = 0; i < logits.numel(); ++i) logits[i] = static_cast<Real>(rng.uniform(-3, 3));
  IntTensor targets({3, 4});
  for (auto& y : targets.data) y = static_cast<int32_t>(rng.integer(0, 6));
  targets.data[3] = kIgnoreTarget;
  // Sequence 1 made exactly right.
  for (int64_t t = 0; t < 4; ++t) {
    const Real* row = logits.data() + (4 + t) * 7;
    targets.data[static_cast<size_t>(4 + t)] = static_cast<int32_t>(std::max_element(row, row + 7) - row);
  }
  ScoreSums sums;
  sums.add(logits, targets);
  const SetScore s = sums.score();
  CHECK(s.tokens == 11);
  CHECK(s.sequences == 3);
  CHECK(s.loss == Approx(cross_entropy(Var(logits), targets).item()).epsilon(1e-6));
  CHECK(s.token == Approx(teacher_forced_accuracy(logits, targets).token));
  CHECK(s.exact == Approx(teacher_forced_accuracy(logits, targets).exact));
  CHECK(s.exact >= 1.0 / 3);
}

TEST_CASE("the hand-built model outputs the previous token, by head 0 alone") {
  std::unique_ptr<SequenceModel> model = testing::previous_token_model();
  const std::vector<Example> examples = testing::previous_token_examples(50, 7);
  const TeacherForcedSet set = teacher_forced_set(model->config(), false, examples, 16);
  CHECK(set.batches.size() == 4);
  CHECK(set.first == std::vector<size_t>{0, 16, 32, 48});
  const SetScore intact = score_set(*model, set);
  CHECK(intact.exact == 1);
  CHECK(intact.token == 1);
  CHECK(intact.loss < 0.1);
  CHECK(greedy_accuracy(*model, examples, 16).exact == 1);
  // Head 0's columns of out_proj zeroed: nothing is written, every answer is lost;
  // teacher-forced exact match is greedy decoding's.
  Tensor& w = model->parameter("blocks.0.attn.out_proj.weight").value();
  for (int64_t r = 0; r < w.size(0); ++r)
    for (int64_t i = 0; i < testing::kHandV; ++i) w[r * w.size(1) + i] = 0;
  const SetScore broken = score_set(*model, set);
  CHECK(broken.token < 0.1);
  CHECK(broken.exact == greedy_accuracy(*model, examples, 16).exact);
  CHECK(broken.loss > 1.0);
}

TEST_CASE("a teacher-forced set refuses an empty set and a batch size below 1") {
  TransformerConfig c = testing::model_config("encoder", 12, 16, 16, 4, 1, 32);
  CHECK_THROWS_WITH(teacher_forced_set(c, false, {}, 4), "an intervention needs at least one example; the set is empty");
  CHECK_THROWS_WITH(teacher_forced_set(c, false, {{{4}, {4}}}, 0), "batch size must be >= 1, got 0");
  CHECK(teacher_forced_set(c, false, {{{4}, {4}}, {{5}, {5}}}, 1).batches.size() == 2);  // 1 is a batch size
}
