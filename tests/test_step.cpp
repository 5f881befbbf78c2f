// One training step (training/step.h): a step of one micro-batch is the
// model's own forward, backward and update.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "datasets/task.h"
#include "framework/ops/loss.h"
#include "models/batch.h"
#include "training/step.h"

using namespace attnlab;

namespace {

using Gradients = std::map<std::string, std::vector<Real>>;

Gradients gradients(const Module& model) {
  Gradients out;
  for (const auto& [name, v] : model.named_parameters())
    out[name] = v.has_grad() ? std::vector<Real>(v.grad().data(), v.grad().data() + v.numel()) : std::vector<Real>{};
  return out;
}

}  // namespace

TEST_CASE("a step of one micro-batch is a plain forward, backward and update: its loss, accuracy and gradients "
          "have their bits, and dropout draws from the model's own stream",
          "[training][step]") {
  TrainSettings s = default_settings();
  s.task.name = "reverse";
  s.task.vocab = 5;
  s.task.min_len = 1;
  s.task.max_len = 7;
  s.model.d_model = 16;
  s.model.n_heads = 2;
  s.model.n_layers = 1;
  s.model.d_ff = 32;
  s.model.dropout = 0.2;  // a stream of the step's own (one draw, derived per micro-batch) would change every bit
  s.batch_size = 6;
  s.heldout = 20;
  s.seed = 11;
  s.threads = GENERATE(1, 4);  // 4 does not divide the batch: one micro-batch, every op split among the threads
  finalize(s);
  TrainState state(s), twin(s);
  REQUIRE(state.model().training());
  Gradients stepped;
  StepHooks hooks;
  hooks.after_backward = [&](TrainState& st, double&) { stepped = gradients(st.model()); };
  const StepResult r = train_step(state, hooks);

  const std::vector<Example> examples = twin.stream().next_batch(s.batch_size);
  const FormattedBatch batch = format_batch(twin.batch_format(), to_pairs(examples));
  twin.model().zero_grad();
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  const Var logits = twin.model().forward(batch.input);
  const Var loss = cross_entropy(logits, batch.targets, ce);
  backward(loss);
  const Accuracy acc = teacher_forced_accuracy(logits.value(), batch.targets);
  CHECK(r.loss == static_cast<double>(loss.item()));
  CHECK(r.accuracy.token == acc.token);
  CHECK(r.accuracy.exact == acc.exact);
  CHECK(r.accuracy.sequences == s.batch_size);
  CHECK(r.tokens == batch.targets.numel() + batch.input.src.numel() * (s.model.arch == Arch::seq2seq));
  CHECK(stepped == gradients(twin.model()));
  CHECK(state.model().dropout_rng().state() == twin.model().dropout_rng().state());
}
