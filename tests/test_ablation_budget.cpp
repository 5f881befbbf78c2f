// interventions/ablation_budget.h: how many examples the report's ablation
// view can afford, worked by hand on the hand-built model.
#include <catch2/catch.hpp>

#include "interventions/ablation_budget.h"
#include "interventions/components.h"
#include "tests/hand_built_model.h"

using namespace attnlab;

TEST_CASE("the ablation budget counts 2 FLOPs per parameter and token over every component's pass and the intact one") {
  std::unique_ptr<SequenceModel> model = testing::previous_token_model();
  double parameters = 0;
  for (const auto& [name, p] : model->named_parameters()) parameters += static_cast<double>(p.value().numel());
  CHECK(forward_flops_per_token(*model) == 2 * parameters);
  const std::vector<Example> examples = testing::previous_token_examples(10, 3);
  // 6 input + 6 output + 2 tokens an example; 2 heads + MLP + block = 4 components, 5 passes.
  const double one = 5 * 2 * parameters * 14;
  CHECK(model_components(model->config()).size() == 4);
  CHECK(examples_within(*model, examples, 3 * one, 1) == 3);
  CHECK(examples_within(*model, examples, 3 * one - 1, 1) == 2);
  CHECK(examples_within(*model, examples, 0, 4) == 4);        // the minimum
  CHECK(examples_within(*model, examples, 1e30, 1) == 10);    // never more than there are
  CHECK(examples_within(*model, examples, 0, 20) == 10);
}
