// Randomised positional encodings (--random-positions P, models/positions.h):
// the position ids drawn in training, the even spread of evaluation, and what
// the models do with them. The gradient check is in tests/gradcheck/test_random_positions.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "framework/error.h"
#include "models/batch.h"
#include "models/decoder_lm.h"
#include "models/encoder_decoder.h"
#include "models/positions.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"
#include "training/evaluate.h"

using namespace attnlab;

namespace {

using Sources = std::vector<std::vector<int32_t>>;

TransformerConfig small(const std::string& arch, const std::string& positional, int64_t random_positions) {
  TransformerConfig c = testing::model_config(arch, 12, 40, 16, 2, 2, 32);
  c.positional = parse_choice<Positional>("positional", positional);
  c.random_positions = random_positions;
  if (random_positions > 0) c.max_len = random_positions;
  return c;
}

// Unequal lengths, so every side of every batch has padding.
TokenPairs pairs() { return {{{4, 5, 6, 7, 8, 9}, {9, 8, 7, 6, 5, 4}}, {{6, 4, 5}, {5, 4, 6}}}; }

IntTensor ids_0_to(int64_t b, int64_t t) {
  IntTensor ids({b, t});
  for (int64_t i = 0; i < b * t; ++i) ids.data[static_cast<size_t>(i)] = static_cast<int32_t>(i % t);
  return ids;
}

bool equal_values(const Var& a, const Var& b) {
  const Tensor &x = a.value(), &y = b.value();
  return x.shape() == y.shape() && std::equal(x.data(), x.data() + x.numel(), y.data());
}

}  // namespace

TEST_CASE("random_subset: n sorted distinct positions of 0..P-1, not 0..n-1, reproducible from the seed",
          "[positions]") {
  Rng a(7), b(7), c(8);
  const std::vector<int32_t> s = random_subset(12, 80, a);
  REQUIRE(s.size() == 12);
  CHECK(std::is_sorted(s.begin(), s.end()));
  CHECK(std::adjacent_find(s.begin(), s.end()) == s.end());  // sorted and no neighbours equal: distinct
  CHECK(s.front() >= 0);
  CHECK(s.back() < 80);
  std::vector<int32_t> first(12);
  std::iota(first.begin(), first.end(), 0);
  CHECK(s != first);
  CHECK(random_subset(12, 80, b) == s);  // the same seed draws the same subset
  CHECK(random_subset(12, 80, c) != s);  // another seed another one
  CHECK(random_subset(12, 80, a) != s);  // and the stream moves on
}

TEST_CASE("random_subset is uniform: each of P positions is taken with probability n / P", "[positions]") {
  // 3 of 8, 40000 draws: each frequency is 0.375 with a standard error of 0.0024.
  Rng rng(1);
  std::vector<int> count(8, 0);
  const int draws = 40000;
  for (int i = 0; i < draws; ++i)
    for (int32_t p : random_subset(3, 8, rng)) ++count[static_cast<size_t>(p)];
  for (size_t p = 0; p < 8; ++p) {
    INFO("position " << p);
    CHECK(std::abs(count[p] / static_cast<double>(draws) - 0.375) < 0.012);
  }
  // n = P takes every position; n = 0 none.
  std::vector<int32_t> all(8);
  std::iota(all.begin(), all.end(), 0);
  CHECK(random_subset(8, 8, rng) == all);
  CHECK(random_subset(0, 8, rng).empty());
}

TEST_CASE("positions that do not fit their range are a ValueError naming both numbers", "[positions]") {
  Rng rng(0);
  CHECK_THROWS_WITH(random_subset(9, 8, rng), Catch::Contains("9 tokens") && Catch::Contains("[0, 8)"));
  CHECK_THROWS_AS(random_subset(-1, 8, rng), ValueError);
  CHECK_THROWS_WITH(spread_positions(5, 4), Catch::Contains("5 tokens") && Catch::Contains("[0, 4)"));
}

TEST_CASE("spread_positions: floor(i P / n), from 0, distinct, 0..n-1 when n = P", "[positions]") {
  CHECK(spread_positions(4, 10) == std::vector<int32_t>{0, 2, 5, 7});
  CHECK(spread_positions(3, 80) == std::vector<int32_t>{0, 26, 53});
  CHECK(spread_positions(5, 5) == std::vector<int32_t>{0, 1, 2, 3, 4});
  CHECK(spread_positions(1, 9) == std::vector<int32_t>{0});
}

TEST_CASE("position ids of a padded batch: each row over its real length, padding repeats the last", "[positions]") {
  Tensor pad({2, 4}, Real(0));
  pad[6] = 1;  // row 1: 2 real tokens
  pad[7] = 1;
  const std::vector<int64_t> lengths = row_lengths(pad, 2, 4);
  CHECK(lengths == std::vector<int64_t>{4, 2});
  CHECK(row_lengths(Tensor(), 3, 5) == std::vector<int64_t>{5, 5, 5});
  const IntTensor spread = spread_position_ids(lengths, 4, 8);
  CHECK(spread.shape == Shape{2, 4});
  CHECK(spread.data == std::vector<int32_t>{0, 2, 4, 6, 0, 4, 4, 4});
  Rng a(3), b(3);
  const IntTensor drawn = random_position_ids(lengths, 4, 8, a);
  Rng row_by_row(3);
  const std::vector<int32_t> r0 = random_subset(4, 8, row_by_row), r1 = random_subset(2, 8, row_by_row);
  CHECK(drawn.data == std::vector<int32_t>{r0[0], r0[1], r0[2], r0[3], r1[0], r1[1], r1[1], r1[1]});
  CHECK(random_position_ids(lengths, 4, 8, b).data == drawn.data);
}

TEST_CASE("decoding position tables: one entry per step, prefixes padded with the last entry", "[positions]") {
  const std::vector<std::vector<int32_t>> tables = {{0, 3, 6}, {1, 2, 5, 9}};
  CHECK(step_position_ids(tables, {1, 0}, 2).data == std::vector<int32_t>{5, 6});
  const IntTensor prefix = prefix_position_ids(tables, {0, 1}, 4);
  CHECK(prefix.shape == Shape{2, 4});
  CHECK(prefix.data == std::vector<int32_t>{0, 3, 6, 6, 1, 2, 5, 9});
}

TEST_CASE("random positions off: forward with explicit positions 0..T-1 equals the default forward bitwise",
          "[positions][models]") {
  for (const std::string arch : {"encoder", "decoder", "seq2seq"})
    for (const std::string positional : {"sinusoidal", "learned"}) {
      INFO(arch << " " << positional);
      auto model = make_model(small(arch, positional, 0), 5);
      FormattedBatch batch = format_batch(parse_choice<BatchFormat>("arch", arch), pairs());
      const std::string rng_before = model->dropout_rng().state();
      Var plain = model->forward(batch.input);
      CHECK(model->dropout_rng().state() == rng_before);  // off draws nothing
      const int64_t b = 2;
      if (arch != "decoder") batch.input.src_pos = ids_0_to(b, batch.input.src.shape[1]);
      if (arch != "encoder") batch.input.tgt_pos = ids_0_to(b, batch.input.tgt_in.shape[1]);
      CHECK(equal_values(model->forward(batch.input), plain));
      // And other explicit positions change the logits (the ids are read).
      if (arch != "decoder") std::reverse(batch.input.src_pos.data.begin(), batch.input.src_pos.data.end());
      if (arch != "encoder") std::reverse(batch.input.tgt_pos.data.begin(), batch.input.tgt_pos.data.end());
      CHECK_FALSE(equal_values(model->forward(batch.input), plain));
    }
}

TEST_CASE("random positions on: training draws them from the dropout stream, evaluation spreads them",
          "[positions][models]") {
  for (const std::string arch : {"encoder", "decoder", "seq2seq"})
    for (const std::string positional : {"sinusoidal", "learned"}) {
      INFO(arch << " " << positional);
      auto on = make_model(small(arch, positional, 40), 5);
      auto twin = make_model(small(arch, positional, 40), 5);
      FormattedBatch batch = format_batch(parse_choice<BatchFormat>("arch", arch), pairs());
      Var first = on->forward(batch.input), again = on->forward(batch.input);
      CHECK_FALSE(equal_values(first, again));              // each training forward draws anew
      CHECK(equal_values(twin->forward(batch.input), first));  // reproducible from the seed
      // The draw is the dropout stream's: the same state gives the same ids.
      Rng replay(0);
      on->dropout_rng() = replay;
      Var from_state = on->forward(batch.input);
      on->dropout_rng() = replay;
      const int64_t src_t = arch == "decoder" ? 0 : batch.input.src.shape[1];
      const int64_t tgt_t = arch == "encoder" ? 0 : batch.input.tgt_in.shape[1];
      if (src_t) batch.input.src_pos = random_position_ids(row_lengths(batch.input.src_pad, 2, src_t), src_t, 40,
                                                           on->dropout_rng());
      if (tgt_t) batch.input.tgt_pos = random_position_ids(row_lengths(batch.input.tgt_pad, 2, tgt_t), tgt_t, 40,
                                                           on->dropout_rng());
      CHECK(equal_values(on->forward(batch.input), from_state));
      // Evaluation: the even spread over each row's real length, drawing nothing.
      on->eval();
      batch.input.src_pos = IntTensor();
      batch.input.tgt_pos = IntTensor();
      const std::string rng_before = on->dropout_rng().state();
      Var spread = on->forward(batch.input);
      CHECK(on->dropout_rng().state() == rng_before);
      if (src_t) batch.input.src_pos = spread_position_ids(row_lengths(batch.input.src_pad, 2, src_t), src_t, 40);
      if (tgt_t) batch.input.tgt_pos = spread_position_ids(row_lengths(batch.input.tgt_pad, 2, tgt_t), tgt_t, 40);
      CHECK(equal_values(on->forward(batch.input), spread));
    }
}

TEST_CASE("random positions on: cached and uncached greedy decoding agree and read the spread positions",
          "[positions][models][greedy]") {
  const Sources sources = {{4, 5, 6, 7}, {8, 9}, {5, 5, 6, 4, 10, 11}};
  for (const std::string positional : {"sinusoidal", "learned"}) {
    INFO(positional);
    DecoderLM decoder(small("decoder", positional, 40), 3);
    DecodeLogits cached, uncached;
    CHECK(decoder.greedy_cached(sources, 5, &cached) == decoder.greedy_uncached(sources, 5, &uncached));
    REQUIRE(cached.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(cached[i].size() == uncached[i].size());
    // The first decoded logits of source 1 = the forward of its prompt at the first 4 ids of
    // spread(2 + 2 + 5 - 1, 40): a budget of 5 new tokens reads at most 4 answer tokens.
    InferenceGuard guard(decoder);
    ModelInput in;
    pad_sequences({{SpecialTokens::bos, 8, 9, SpecialTokens::sep}}, in.tgt_in, in.tgt_pad);
    const std::vector<int32_t> table = spread_positions(8, 40);
    CHECK(decoding_positions(decoder.config(), 4, 4) == table);
    in.tgt_pos = IntTensor({1, 4});
    in.tgt_pos.data.assign(table.begin(), table.begin() + 4);
    Var logits = decoder.forward(in);  // (1, 4, V)
    const Real* last = logits.value().data() + 3 * logits.size(2);
    for (int64_t v = 0; v < logits.size(2); ++v) CHECK(cached[1][0][static_cast<size_t>(v)] == Approx(last[v]).margin(1e-5));

    EncoderDecoder seq2seq(small("seq2seq", positional, 40), 3);
    DecodeLogits s_cached, s_uncached;
    CHECK(seq2seq.greedy_cached(sources, 5, &s_cached) == seq2seq.greedy_uncached(sources, 5, &s_uncached));
    for (size_t i = 0; i < 3; ++i) CHECK(s_cached[i].size() == s_uncached[i].size());
  }
}

TEST_CASE("random positions: invalid settings are refused naming the value", "[positions][config]") {
  TransformerConfig c = small("encoder", "sinusoidal", 40);
  c.random_positions = -1;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("random_positions") && Catch::Contains("-1"));
  c.random_positions = 30;  // a range other than the table
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("random_positions") && Catch::Contains("30") &&
                                      Catch::Contains("40"));
  for (const std::string positional : {"rope", "none"}) {
    c = small("encoder", positional, 40);
    CHECK_THROWS_WITH(c.validate(), Catch::Contains(positional));
  }
  c = small("decoder", "learned", 40);
  CHECK_NOTHROW(c.validate());
  CHECK(TransformerConfig::from_json(c.to_json()).random_positions == 40);
  auto model = make_model(c, 1);
  ModelInput in;
  in.tgt_in = IntTensor({1, 3}, 4);
  in.tgt_pos = IntTensor({1, 3}, 40);
  CHECK_THROWS_WITH(model->forward(in), Catch::Contains("position id 40"));
  in.tgt_pos = IntTensor({1, 2}, 0);
  CHECK_THROWS_AS(model->forward(in), ShapeError);
}

TEST_CASE("decoding_positions: prompt + answer positions, 0..n-1 off, spread over P on, at most the table",
          "[positions][random-positions]") {
  TransformerConfig off = small("decoder", "learned", 0);  // max_len 40
  const std::vector<int32_t> first5 = {0, 1, 2, 3, 4};
  CHECK(decoding_positions(off, 3, 2) == first5);
  CHECK(decoding_positions(off, 30, 20).size() == 40);  // the table ends decoding
  TransformerConfig on = small("decoder", "learned", 40);
  CHECK(decoding_positions(on, 3, 2) == spread_positions(5, 40));
  CHECK(decoding_positions(on, 3, 2) != first5);
  CHECK(decoding_positions(on, 30, 20) == spread_positions(40, 40));
  CHECK(decoding_positions(on, 4, -1) == spread_positions(4, 40));  // a budget of 0 reads the prompt at most
}

TEST_CASE("random positions: a source's greedy answer depends on its own budget, never on its batch",
          "[positions][models][greedy][random-positions]") {
  // eval decodes batches of held-out inputs with answers of several lengths;
  // predict decodes one. Each source must get what it gets alone.
  const Sources sources = {{4, 5, 6, 7}, {8, 9}, {5, 5, 6, 4, 10, 11}};
  const std::vector<int64_t> budgets = {5, 3, 7};
  for (const std::string positional : {"sinusoidal", "learned"}) {
    INFO(positional);
    DecoderLM decoder(small("decoder", positional, 40), 3);
    EncoderDecoder seq2seq(small("seq2seq", positional, 40), 3);
    const Sources dec = decoder.greedy_cached(sources, budgets), s2s = seq2seq.greedy_cached(sources, budgets);
    CHECK(decoder.greedy_uncached(sources, budgets) == dec);
    CHECK(seq2seq.greedy_uncached(sources, budgets) == s2s);
    for (size_t i = 0; i < sources.size(); ++i) {
      INFO("source " << i);
      CHECK(decoder.greedy({sources[i]}, budgets[i])[0] == dec[i]);
      CHECK(seq2seq.greedy({sources[i]}, budgets[i])[0] == s2s[i]);
      CHECK(static_cast<int64_t>(dec[i].size()) <= budgets[i]);
      CHECK(static_cast<int64_t>(s2s[i].size()) <= budgets[i]);
    }
    CHECK_THROWS_WITH(decoder.greedy(sources, std::vector<int64_t>{5, 3}), Catch::Contains("2 token budgets for 3"));
  }
}

TEST_CASE("random positions: a teacher-forced pass over a greedy answer reads the decoding's positions",
          "[positions][models][greedy][random-positions]") {
  // predict --logits and --json, attention: each distribution of the pass is
  // the one decoding chose from.
  const std::vector<int32_t> source = {4, 5, 6, 7, 8};
  for (const std::string arch : {"decoder", "seq2seq"})
    for (const std::string positional : {"sinusoidal", "learned"}) {
      INFO(arch << " " << positional);
      auto model = make_model(small(arch, positional, 40), 11);
      for (const int64_t budget : {3, 6, 30}) {
        INFO("budget " << budget);
        DecodeLogits decoded;
        auto* dec = dynamic_cast<DecoderLM*>(model.get());
        auto* s2s = dynamic_cast<EncoderDecoder*>(model.get());
        const std::vector<int32_t> answer = dec ? dec->greedy_cached({source}, budget, &decoded)[0]
                                                : s2s->greedy_cached({source}, budget, &decoded)[0];
        const FormattedBatch batch = teacher_forced_batch(model->config(), source, answer, budget);
        InferenceGuard guard(*model);
        const Var logits = model->forward(batch.input);  // (1, T, V)
        const int64_t V = logits.size(2), T = logits.size(1);
        size_t k = 0;  // the decoded steps, in order
        for (int64_t t = 0; t < T; ++t) {
          if (batch.targets.data[static_cast<size_t>(t)] == kIgnoreTarget) continue;
          REQUIRE(k < decoded[0].size());
          for (int64_t v = 0; v < V; ++v)
            CHECK(decoded[0][k][static_cast<size_t>(v)] == Approx(logits.value().data()[t * V + v]).margin(1e-4));
          ++k;
        }
        CHECK(k == decoded[0].size());
      }
    }
}
