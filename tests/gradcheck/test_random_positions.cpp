// Gradient checks of the models with randomised positions (float64 engine,
// tolerances of tests/gradcheck/gradcheck.h): training mode, so every forward
// draws its positions from the dropout stream; the stream is reset before each
// forward, so the finite differences see one fixed draw of random positions.
#include "tests/gradcheck/gradcheck.h"

#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"

using namespace attnlab;
using attnlab::testing::gradcheck;

namespace {

void check_random_positions(const std::string& arch, const std::string& positional) {
  TransformerConfig c = testing::model_config(arch, 9, 16, 8, 2, 2, 16);
  c.positional = parse_choice<Positional>("positional", positional);
  c.random_positions = 16;
  auto model = make_model(c, /*seed=*/13);
  const TokenPairs pairs = {{{4, 5, 6, 4}, {5, 4, 6, 8}}, {{6, 7}, {7, 6}}};  // padding on every side
  const FormattedBatch batch = format_batch(parse_choice<BatchFormat>("arch", arch), pairs);
  const Rng start(21);
  auto fn = [&](const std::vector<Var>&) {
    model->dropout_rng() = start;
    return cross_entropy(model->forward(batch.input), batch.targets);
  };
  // The draw is not 0..T-1 (so the check is not today's model again): the
  // positions change the loss.
  model->dropout_rng() = Rng(22);
  const Real other = cross_entropy(model->forward(batch.input), batch.targets).value()[0];
  REQUIRE(fn({}).value()[0] != other);
  INFO(arch << " " << positional);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(fn, model->parameters()));
}

}  // namespace

TEST_CASE("random positions gradients: encoder tagger, learned and sinusoidal", "[gradcheck][models][positions]") {
  check_random_positions("encoder", "learned");
  check_random_positions("encoder", "sinusoidal");
}

TEST_CASE("random positions gradients: decoder LM, learned and sinusoidal", "[gradcheck][models][positions]") {
  check_random_positions("decoder", "learned");
  check_random_positions("decoder", "sinusoidal");
}

TEST_CASE("random positions gradients: encoder-decoder, learned", "[gradcheck][models][positions]") {
  check_random_positions("seq2seq", "learned");
}
