// The logit lens and direct logit attribution (interventions/lens.h): on the
// hand-built previous-token model (tests/hand_built_model.h) the lens and the
// parts are computed by hand; on random models of every kind the last point's
// lens is the model's own output and the parts sum to the logit.
#include <catch2/catch.hpp>

#include <cmath>

#include "interventions/lens.h"
#include "tests/fixtures.h"
#include "tests/hand_built_model.h"

using namespace attnlab;

namespace {

// What ln_f's scale and centre make of the hand-built stream: the token and
// position one-hots (1 each) and `answer` in the answer subspace.
struct HandStream {
  double mean, inv_sigma;
};
HandStream hand_stream(double answer) {
  const double d = testing::kHandWidth, mean = (2 + answer) / d;
  const double var = (2 * (1 - mean) * (1 - mean) + (answer - mean) * (answer - mean) + (d - 3) * mean * mean) / d;
  return {mean, 1 / std::sqrt(var + 1e-5)};
}

// a: what ln1 scales a stream of two ones by, so what head 0's value carries (hand_built_model.h).
double hand_value() {
  const double d = testing::kHandWidth, mean = 2 / d;
  return 1 / std::sqrt((2 * (1 - mean) * (1 - mean) + (d - 2) * mean * mean) / d + 1e-5);
}

double part(const Attribution& a, const std::string& name) {
  for (const LogitPart& p : a.parts)
    if (p.component == name) return p.logit;
  FAIL("no part named " << name);
  return 0;
}

// Every parameter moved by noise (layer norms' scales and shifts and every bias
// included), so that the frozen-scale read-out has each term to get right.
void perturb(SequenceModel& model, uint64_t seed) {
  Rng rng(seed);
  for (auto& [name, p] : model.named_parameters())
    for (int64_t i = 0; i < p.value().numel(); ++i) p.value()[i] += static_cast<Real>(rng.uniform(-0.3, 0.3));
}

FormattedBatch random_batch(const TransformerConfig& c, uint64_t seed) {
  Rng rng(seed);
  TokenPairs pairs;
  for (int n = 0; n < 3; ++n) {
    std::vector<int32_t> in, out;
    for (int64_t t = 0; t < 3 + n; ++t) in.push_back(static_cast<int32_t>(rng.integer(4, c.vocab_size - 1)));
    for (int64_t t = 0; t < (c.arch == Arch::encoder ? 3 + n : 2 + n); ++t) out.push_back(in[static_cast<size_t>(t)]);
    pairs.emplace_back(in, out);
  }
  return lens_batch(c, false, pairs);
}

std::vector<TransformerConfig> random_configs(Norm norm) {
  std::vector<TransformerConfig> out;
  for (const char* arch : {"encoder", "decoder", "seq2seq"}) {
    TransformerConfig c = testing::model_config(arch, 10, 12, 12, 3, 2, 16);
    c.norm = norm;
    out.push_back(c);
  }
  out[1].tie_embeddings = true;
  TransformerConfig free = testing::model_config("encoder", 10, 12, 12, 1, 2, 16);
  free.parameter_free_attention = true;
  free.norm = norm;
  free.positional = Positional::rope;
  out.push_back(free);
  return out;
}

}  // namespace

TEST_CASE("the lens on the hand-built model: undecided at the embedding, the previous token after block 0") {
  auto model = testing::previous_token_model();
  const std::vector<Example> examples = testing::previous_token_examples(4, 11);
  const LensReading r = read_lens(*model, lens_batch(model->config(), false, to_pairs(examples)));
  REQUIRE(r.points == std::vector<std::string>{"embed", "blocks.0.resid_post"});
  const HandStream after = hand_stream(hand_value());
  // After block 0 the answer's logit is a·(1/σ) above the 7 others, which are equal.
  const double p_right = 1 / (1 + 7 * std::exp(-hand_value() * after.inv_sigma));
  for (size_t b = 0; b < examples.size(); ++b)
    for (size_t t = 0; t < examples[b].output.size(); ++t) {
      const int32_t y = examples[b].output[t];
      // The embedding has nothing in the answer subspace: every logit is equal,
      // the top token is id 0 (the first on ties) and the answer ranks by its id.
      const LensCell& at_embed = r.cells[0][b * testing::kHandPositions + t];
      CHECK(at_embed.top == 0);
      CHECK(at_embed.top_probability == Approx(1.0 / testing::kHandV).epsilon(1e-6));
      CHECK(at_embed.answer_probability == Approx(1.0 / testing::kHandV).epsilon(1e-6));
      CHECK(at_embed.answer_rank == y + 1);
      const LensCell& after_block = r.cells[1][b * testing::kHandPositions + t];
      CHECK(after_block.top == y);
      CHECK(after_block.answer_rank == 1);
      CHECK(after_block.answer_probability == Approx(p_right).epsilon(1e-5));
      CHECK(after_block.top_probability == after_block.answer_probability);
    }
}

TEST_CASE("direct logit attribution on the hand-built model credits head 0, and head 1 and the MLP with exactly 0") {
  auto model = testing::previous_token_model();
  const std::vector<Example> examples = testing::previous_token_examples(3, 5);
  const LensReading r = read_lens(*model, lens_batch(model->config(), false, to_pairs(examples)));
  REQUIRE(r.refused.empty());
  REQUIRE(r.attribution.size() == 3 * testing::kHandPositions);
  const double a = hand_value(), d = testing::kHandWidth;
  const HandStream s = hand_stream(a);
  for (const Attribution& at : r.attribution) {
    CHECK(at.answer == examples[static_cast<size_t>(at.example)].output[static_cast<size_t>(at.position)]);
    CHECK(at.inverse_scale == Approx(s.inv_sigma).epsilon(1e-6));
    // Head 0 writes a into the answer's dim: (a − a/d)/σ; the embedding's two
    // ones only shift the centre: −(2/d)/σ.
    CHECK(part(at, "blocks.0.attn.h0") == Approx((a - a / d) * s.inv_sigma).epsilon(1e-5));
    CHECK(part(at, "embed") == Approx(-2 / d * s.inv_sigma).epsilon(1e-5));
    CHECK(part(at, "blocks.0.attn.h1") == 0);
    CHECK(part(at, "blocks.0.mlp") == 0);
    CHECK(part(at, "blocks.0.attn.out_proj.bias") == 0);
    CHECK(part(at, "constant") == 0);
    CHECK(at.logit == Approx((a - (2 + a) / d) * s.inv_sigma).epsilon(1e-5));
  }
}

TEST_CASE("the last point's lens is the model's own output, bitwise, on every kind, pre-LN, post-LN and no norm") {
  for (Norm norm : {Norm::pre, Norm::post, Norm::none})
    for (const TransformerConfig& c : random_configs(norm)) {
      auto model = make_model(c, 7);
      perturb(*model, 8);
      const FormattedBatch batch = random_batch(c, 9);
      const LensReading r = read_lens(*model, batch);
      Tensor logits;
      {
        InferenceGuard guard(*model);
        logits = model->forward(batch.input).value();
      }
      const int64_t P = static_cast<int64_t>(r.points.size());
      REQUIRE(P == c.n_layers + 1);
      const Real* last = r.logits.data() + (P - 1) * logits.numel();
      INFO(name_of(c.arch) << " " << name_of(norm));
      CHECK(std::equal(logits.data(), logits.data() + logits.numel(), last));
      CHECK_FALSE(std::equal(logits.data(), logits.data() + logits.numel(), r.logits.data()));
      // random_batch's inputs have 3, 4, 5 tokens and answers 2, 3, 4 (the encoder's 3, 4, 5).
      const std::vector<int64_t> lengths = c.arch == Arch::decoder   ? std::vector<int64_t>{7, 9, 11}   // [bos] in [sep] out
                                           : c.arch == Arch::seq2seq ? std::vector<int64_t>{3, 4, 5}   // [bos] out
                                                                     : std::vector<int64_t>{3, 4, 5};  // in
      CHECK(r.lengths == lengths);
    }
}

namespace {

// The parts of each answer's logit sum to it: per block each attention's heads
// and out_proj bias (none without projections or biases), the MLP (none
// attention-only), plus the embedding and the constant.
void check_parts_sum(const TransformerConfig& c) {
  auto model = make_model(c, 21);
  perturb(*model, 22);
  const LensReading r = read_lens(*model, random_batch(c, 23));
  REQUIRE(r.refused.empty());
  int64_t answers = 0;
  for (int32_t y : r.answers.data) answers += y != kIgnoreTarget;
  REQUIRE(static_cast<int64_t>(r.attribution.size()) == answers);
  for (const Attribution& at : r.attribution) {
    double sum = 0;
    for (const LogitPart& p : at.parts) sum += p.logit;
    INFO(c.to_json().dump() << " example " << at.example << " position " << at.position);
    CHECK(sum == Approx(at.logit).epsilon(1e-4).margin(1e-5));
    const int64_t heads = c.parameter_free_attention ? 1 : c.n_heads;
    const int64_t attentions = c.arch == Arch::seq2seq ? 2 : 1;
    const int64_t bias = c.parameter_free_attention || c.no_bias ? 0 : 1, mlp = c.attention_only ? 0 : 1;
    CHECK(static_cast<int64_t>(at.parts.size()) == 2 + c.n_layers * (attentions * (heads + bias) + mlp));
    if (c.norm == Norm::none) CHECK(at.inverse_scale == 1);  // no norm: no scale to freeze
  }
}

}  // namespace

TEST_CASE("the parts of each answer's logit sum to it on random pre-LN models of every kind") {
  for (const TransformerConfig& c : random_configs(Norm::pre)) check_parts_sum(c);
}

TEST_CASE("the parts sum to the logit without norms (through the head alone), attention-only and without biases") {
  std::vector<TransformerConfig> configs = random_configs(Norm::none);
  for (TransformerConfig c : random_configs(Norm::pre)) {
    c.attention_only = true;
    c.no_bias = !c.parameter_free_attention;
    configs.push_back(c);
    c.norm = Norm::none;
    configs.push_back(c);
  }
  for (const TransformerConfig& c : configs) check_parts_sum(c);
}

TEST_CASE("an attention-only model's attribution has no MLP parts, one without biases no bias parts") {
  TransformerConfig c = testing::model_config("seq2seq", 10, 12, 8, 2, 1, 16);
  c.attention_only = true;
  c.no_bias = true;
  c.norm = Norm::none;
  auto model = make_model(c, 4);
  const LensReading r = read_lens(*model, random_batch(c, 5));
  std::vector<std::string> names;
  for (const LogitPart& p : r.attribution.at(0).parts) names.push_back(p.component);
  CHECK(names == std::vector<std::string>{"decoder.embed", "decoder.blocks.0.self_attn.h0",
                                          "decoder.blocks.0.self_attn.h1", "decoder.blocks.0.cross_attn.h0",
                                          "decoder.blocks.0.cross_attn.h1", "constant"});
  CHECK(part(r.attribution.at(0), "constant") == 0);  // no head bias, no final norm
}

TEST_CASE("seq2seq attribution reads the decoder's stream: self- and cross-attention heads, in forward order") {
  TransformerConfig c = testing::model_config("seq2seq", 10, 12, 8, 2, 1, 16);
  auto model = make_model(c, 4);
  const LensReading r = read_lens(*model, random_batch(c, 5));
  REQUIRE(r.points == std::vector<std::string>{"decoder.embed", "decoder.blocks.0.resid_post"});
  std::vector<std::string> names;
  for (const LogitPart& p : r.attribution.at(0).parts) names.push_back(p.component);
  CHECK(names == std::vector<std::string>{"decoder.embed", "decoder.blocks.0.self_attn.h0",
                                          "decoder.blocks.0.self_attn.h1", "decoder.blocks.0.self_attn.out_proj.bias",
                                          "decoder.blocks.0.cross_attn.h0", "decoder.blocks.0.cross_attn.h1",
                                          "decoder.blocks.0.cross_attn.out_proj.bias", "decoder.blocks.0.mlp",
                                          "constant"});
}

TEST_CASE("a post-LN model gets the lens but no attribution, with the reason") {
  TransformerConfig c = testing::model_config("decoder", 10, 12, 8, 2, 1, 16);
  c.norm = Norm::post;
  auto model = make_model(c, 4);
  const LensReading r = read_lens(*model, random_batch(c, 5));
  CHECK(r.attribution.empty());
  CHECK(r.refused ==
        "direct logit attribution needs a pre-LN or norm-free model: a post-LN block renormalises the stream, so no "
        "sum of parts gives the logit");
  CHECK(r.cells.size() == 2);
  CHECK(model->hooks().empty());
}

TEST_CASE("a language model's lens batch: the text, each position answered by the next character, the last by none") {
  TransformerConfig c = testing::model_config("decoder", 10, 12, 8, 2, 1, 16);
  const FormattedBatch b = lens_batch(c, true, {{{5, 6, 7, 8}, {}}, {{9, 4}, {}}});
  CHECK(b.input.tgt_in.data == std::vector<int32_t>{5, 6, 7, 8, 9, 4, 0, 0});
  CHECK(b.targets.data == std::vector<int32_t>{6, 7, 8, -100, 4, -100, -100, -100});
  CHECK_THROWS_WITH(lens_batch(c, true, {{{}, {}}}), "the input text is empty");
}

TEST_CASE("a batch reads each example as it reads alone, and the model's own hooks stay set") {
  TransformerConfig c = testing::model_config("decoder", 10, 12, 8, 2, 2, 16);
  auto model = make_model(c, 31);
  perturb(*model, 32);
  const FormattedBatch batch = random_batch(c, 33);  // 3 examples of different lengths, padded
  int64_t seen = 0;
  model->hooks().observe("logits", [&seen](const std::string&, const Var&) { ++seen; });
  const LensReading all = read_lens(*model, batch);
  CHECK(seen == 1);
  CHECK(model->hooks().observed("logits"));
  const int64_t T = batch.targets.shape[1];
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = all.lengths[static_cast<size_t>(b)];
    // Example b alone: its row of the padded batch, cut to its length.
    FormattedBatch alone;
    alone.input.tgt_in = IntTensor({1, n});
    alone.targets = IntTensor({1, n});
    for (int64_t t = 0; t < n; ++t) {
      alone.input.tgt_in.data[static_cast<size_t>(t)] = batch.input.tgt_in.data[static_cast<size_t>(b * T + t)];
      alone.targets.data[static_cast<size_t>(t)] = batch.targets.data[static_cast<size_t>(b * T + t)];
    }
    const LensReading r = read_lens(*model, alone);
    for (size_t p = 0; p < r.points.size(); ++p)
      for (int64_t t = 0; t < n; ++t) {
        const LensCell &x = r.cells[p][static_cast<size_t>(t)], &y = all.cells[p][static_cast<size_t>(b * T + t)];
        CHECK(x.top == y.top);
        CHECK(x.answer_rank == y.answer_rank);
        CHECK(x.answer_probability == Approx(y.answer_probability).margin(1e-6));
      }
    std::vector<Attribution> mine;
    for (const Attribution& a : all.attribution)
      if (a.example == b) mine.push_back(a);
    REQUIRE(mine.size() == r.attribution.size());
    for (size_t k = 0; k < mine.size(); ++k)
      for (size_t j = 0; j < mine[k].parts.size(); ++j)
        CHECK(mine[k].parts[j].logit == Approx(r.attribution[k].parts[j].logit).margin(1e-5));
  }
}
