// The repeat task (datasets/repeat.cpp) and the figures a held-out evaluation
// computes beside accuracy (training/evaluate.h): the teacher-forced loss of
// every task and a language model's in-context split, each against the same
// quantity composed from the fused cross-entropy over masked targets.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "datasets/splits.h"
#include "datasets/task.h"
#include "framework/error.h"
#include "framework/ops/loss.h"
#include "interventions/teacher_forced.h"
#include "models/batch.h"
#include "training/evaluate.h"
#include "training/settings.h"

using namespace attnlab;

namespace {

TaskConfig repeat_config(int64_t vocab, int64_t min_len, int64_t max_len) {
  TaskConfig c;
  c.name = "repeat";
  c.vocab = vocab;
  c.min_len = min_len;
  c.max_len = max_len;
  return c;
}

TransformerConfig tiny_decoder(int64_t vocab_size) {
  TransformerConfig c;
  c.arch = Arch::decoder;
  c.vocab_size = vocab_size;
  c.d_model = 16;
  c.n_heads = 2;
  c.n_layers = 1;
  c.d_ff = 32;
  c.max_len = 32;
  return c;
}

// The summed cross-entropy of the targets of `batch` that `keep(b, t)` keeps,
// from the fused loss (a mean) over a copy of the targets with the others ignored.
template <class Keep>
std::pair<double, double> masked_loss(SequenceModel& model, const FormattedBatch& batch, Keep keep) {
  IntTensor targets = batch.targets;
  const int64_t T = targets.shape[1];
  double n = 0;
  for (size_t i = 0; i < targets.data.size(); ++i) {
    if (!keep(static_cast<int64_t>(i) / T, static_cast<int64_t>(i) % T)) targets.data[i] = kIgnoreTarget;
    n += targets.data[i] != kIgnoreTarget;
  }
  InferenceGuard guard(model);
  const Var logits = model.forward(batch.input);
  return {n > 0 ? static_cast<double>(cross_entropy(logits, targets).item()) * n : 0.0, n};
}

}  // namespace

TEST_CASE("repeat: each window is r r, input its first 2L - 1 tokens, output its last, L in the range", "[datasets][repeat]") {
  const auto task = make_task(repeat_config(5, 3, 6));
  CHECK(task->language_model());
  CHECK(task->vocab_size() == 9);
  CHECK(task->min_input_len() == 5);
  CHECK(task->max_input_len() == 11);
  CHECK(task->max_output_len() == 11);
  CHECK(task->token_unit() == "token");
  Rng rng(7);
  std::set<size_t> lengths;
  for (int i = 0; i < 200; ++i) {
    const Example e = task->sample(rng);
    const size_t n = e.input.size(), L = (n + 1) / 2;
    REQUIRE(n % 2 == 1);
    lengths.insert(L);
    REQUIRE(e.output.size() == n);
    for (size_t t = 0; t + 1 < n; ++t) REQUIRE(e.output[t] == e.input[t + 1]);  // shifted by one
    for (size_t t = L; t < n; ++t) REQUIRE(e.input[t] == e.input[t - L]);     // the repeat
    REQUIRE(e.output.back() == e.input[L - 1]);                                // the window's last token
    for (int32_t id : e.input) REQUIRE((id >= kNumSpecial && id < 9));
    REQUIRE(task->solve(e.input) == e.output);
  }
  CHECK(lengths == std::set<size_t>{3, 4, 5, 6});
  CHECK(task->input_space_size() == 125 + 625 + 3125 + 15625);
}

TEST_CASE("repeat: solve names an input that is not a repeated window, and min_len 1 is refused", "[datasets][repeat]") {
  const auto task = make_task(repeat_config(5, 3, 3));
  CHECK_THROWS_WITH(task->solve({4, 5, 6, 4}), "repeat: the input has 4 symbols; expected 2L - 1 (a sequence of L and "
                                              "its repeat less the last symbol)");
  CHECK_THROWS_WITH(task->solve({4, 5, 6, 4, 6}),
                    "repeat: input symbol 4 differs from symbol 1; expected the first 3 symbols repeated");
  CHECK_THROWS_AS(task->solve({4, 5, 1, 4, 5}), ValueError);  // a special token
  CHECK(task->solve({4, 5, 6, 4, 5}) == std::vector<int32_t>{5, 6, 4, 5, 6});
  CHECK_THROWS_WITH(make_task(repeat_config(5, 1, 3)),
                    "--task repeat needs --min-len >= 2 (a symbol to predict from its earlier occurrence), got 1");
  CHECK_NOTHROW(make_task(repeat_config(5, 2, 3)));
}

TEST_CASE("the in-context split: repeat compares its first copy with the repeat after r[0], other language models their "
          "halves", "[datasets][repeat]") {
  const auto task = make_task(repeat_config(5, 3, 6));
  // 2L - 1 = 7 targets (L = 4): the first copy's are 0..2, target 3 is r[0], the repeat's 4..6.
  CHECK(task->in_context_split(7).early_end == 3);
  CHECK(task->in_context_split(7).late_begin == 4);
  CHECK(task->in_context_split(3).early_end == 1);
  CHECK(task->in_context_split(3).late_begin == 2);
  TaskConfig copy_config;
  copy_config.name = "copy";
  const auto copy = make_task(copy_config);
  CHECK(copy->in_context_split(9).early_end == 4);
  CHECK(copy->in_context_split(9).late_begin == 4);
}

TEST_CASE("lm_batch: the summed loss, the early and late sums and counts are the fused cross-entropy's over those targets",
          "[evaluate][repeat]") {
  const auto task = make_task(repeat_config(6, 3, 5));
  auto model = make_model(tiny_decoder(task->vocab_size()), 3);
  Rng rng(11);
  std::vector<Example> windows;
  for (int i = 0; i < 9; ++i) windows.push_back(task->sample(rng));
  const BatchFigures f = lm_batch(*model, *task, windows, 2, 9);  // seven windows of mixed lengths
  TokenPairs pairs;
  for (size_t i = 2; i < 9; ++i) pairs.emplace_back(windows[i].input, windows[i].output);
  const FormattedBatch batch = format_batch(BatchFormat::lm, pairs);
  auto split = [&](int64_t b) { return task->in_context_split(static_cast<int64_t>(windows[2 + b].output.size())); };
  const auto all = masked_loss(*model, batch, [](int64_t, int64_t) { return true; });
  const auto early = masked_loss(*model, batch, [&](int64_t b, int64_t t) { return t < split(b).early_end; });
  const auto late = masked_loss(*model, batch, [&](int64_t b, int64_t t) { return t >= split(b).late_begin; });
  CHECK(f.loss_tokens == all.second);
  CHECK(f.tokens == all.second);
  CHECK(f.loss == Approx(all.first).epsilon(1e-5));
  CHECK(f.early_tokens == early.second);
  CHECK(f.early_loss == Approx(early.first).epsilon(1e-5));
  CHECK(f.late_tokens == late.second);
  CHECK(f.late_loss == Approx(late.first).epsilon(1e-5));
  CHECK(f.early_tokens + f.late_tokens + 7 == f.tokens);  // each window's r[0] target is in neither
  CHECK(f.late_right <= f.right);

  // The interventions' scorer splits the same windows the same way.
  const std::vector<Example> seven(windows.begin() + 2, windows.end());
  const TeacherForcedSet set = teacher_forced_set(model->config(), true, seven, 7, task.get());  // the batch lm_batch ran
  REQUIRE(set.splits.size() == 7);
  const SetScore score = score_set(*model, set);
  const LmScore lm = lm_totals({f});
  CHECK(score.in_context_loss == Approx(lm.in_context_loss).epsilon(1e-9));
  CHECK(score.late_token == Approx(lm.late_token));
  CHECK(score.loss == Approx(lm.loss).epsilon(1e-9));
  CHECK(std::isnan(score_set(*model, teacher_forced_set(model->config(), true, seven, 7)).in_context_loss));
}

TEST_CASE("lm_totals: means over the batches' sums, in-context loss late minus early, NaN without a part", "[evaluate][repeat]") {
  BatchFigures a, b;
  a.loss = 10, a.tokens = a.loss_tokens = 8, a.right = 4, a.early_loss = 6, a.early_tokens = 3, a.late_loss = 1,
  a.late_tokens = 4, a.late_right = 3;
  b.loss = 2, b.tokens = b.loss_tokens = 4, b.right = 4, b.early_loss = 0, b.early_tokens = 1, b.late_loss = 1,
  b.late_tokens = 2, b.late_right = 2;
  const LmScore s = lm_totals({a, b});
  CHECK(s.loss == Approx(1.0));
  CHECK(s.tokens == 12);
  CHECK(s.token == Approx(8.0 / 12));
  CHECK(s.early_loss == Approx(1.5));
  CHECK(s.late_loss == Approx(2.0 / 6));
  CHECK(s.in_context_loss == Approx(2.0 / 6 - 1.5));
  CHECK(s.late_token == Approx(5.0 / 6));
  CHECK(teacher_forced_loss({a, b}) == Approx(1.0));
  BatchFigures none;
  none.loss = 3, none.tokens = none.loss_tokens = 1;
  CHECK(std::isnan(lm_totals({none}).in_context_loss));
  CHECK(std::isnan(lm_totals({none}).late_token));
  CHECK(std::isnan(teacher_forced_loss({})));
}

TEST_CASE("greedy_batch: its loss is the teacher-forced cross-entropy of the answers as training formats them",
          "[evaluate]") {
  TaskConfig c;
  c.name = "reverse";
  c.vocab = 5;
  c.min_len = 2;
  c.max_len = 5;
  const auto task = make_task(c);
  for (Layout layout : {Layout::special, Layout::bare}) {
    TransformerConfig config = tiny_decoder(task->vocab_size());
    config.layout = layout;
    auto model = make_model(config, 5);
    const HeldOut held = make_heldout(*task, 12, 1);
    const BatchFigures f = greedy_batch(*model, held.examples(), 0, 12);
    const FormattedBatch batch = format_batch(batch_format(config, false), to_pairs(held.examples()));
    const auto want = masked_loss(*model, batch, [](int64_t, int64_t) { return true; });
    CHECK(f.loss_tokens == want.second);
    CHECK(f.loss == Approx(want.first).epsilon(1e-5));
    const std::optional<HeldoutScore> score = score_heldout(*model, *task, held.examples());
    REQUIRE(score);
    CHECK(score->loss == Approx(want.first / want.second).epsilon(1e-5));
    CHECK(std::isnan(score->lm.in_context_loss));
  }
}
