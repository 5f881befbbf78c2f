// Activation patching (interventions/patching.h) where the answer is known by
// construction: the hand-built previous-token model (tests/hand_built_model.h)
// localises a corrupted symbol to head 0 and to the positions it moves through;
// nothing patched restores 0 and everything 1 (also on random models); the
// logit differences and their averaging by hand on small logits.
#include <catch2/catch.hpp>

#include <cmath>

#include "framework/error.h"
#include "interventions/patching.h"
#include "tests/fixtures.h"
#include "tests/hand_built_model.h"

using namespace attnlab;
using Catch::Matchers::WithinAbs;

namespace {

// The hand-built task's example with its input at k changed to another symbol (the answer follows).
Example corrupt_at(const Example& clean, size_t k) {
  Example x = clean;
  x.input[k] = static_cast<int32_t>(SpecialTokens::count + (x.input[k] - SpecialTokens::count + 1) % testing::kHandSymbols);
  for (size_t p = 0; p < x.input.size(); ++p) x.output[p] = x.input[p == 0 ? 0 : p - 1];
  return x;
}

// The fraction restored by each patch at the pair's only answer position.
std::vector<double> restored(SequenceModel& model, BatchFormat format, const PatchingPair& pair,
                             const std::vector<Patch>& patches) {
  const PatchingRun run = run_patching(model, format, {pair}, patches);
  REQUIRE(run.pairs[0].size() == 1);
  return fractions_restored(ld_sums(run));
}

// A patch that copies nothing, and one that copies every position of the first residual stream of each stack.
Patch nothing() { return {PatchKind::residual, "nothing", "", -1, {}}; }
Patch everything(const TransformerConfig& c) {
  Patch p{PatchKind::residual, "everything", "", -1, {}};
  for (const std::string& stack : c.arch == Arch::seq2seq ? std::vector<std::string>{"encoder.", "decoder."}
                                                         : std::vector<std::string>{""})
    p.regions.push_back({stack + "blocks.0.resid_pre", -1, 0, 0});
  return p;
}

}  // namespace

TEST_CASE("patching the previous-token model localises a corrupted symbol at K to head 0 at K + 1 and the stream at K") {
  std::unique_ptr<SequenceModel> model = testing::previous_token_model();
  const TransformerConfig& c = model->config();
  const Example clean = testing::previous_token_examples(1, 5)[0];
  for (size_t k = 1; k <= 4; ++k) {
    INFO("corrupted position " << k);
    const PatchingPair pair = patching_pair(BatchFormat::encoder, clean, corrupt_at(clean, k));
    REQUIRE(pair.answers.size() == 1);  // only the answer at k + 1 reads the symbol at k
    CHECK(pair.answers[0].row == static_cast<int64_t>(k + 1));
    const std::vector<Patch> heads = head_patches(c, BatchFormat::encoder, pair, false);
    REQUIRE(heads.size() == 2);
    const std::vector<double> all = restored(*model, BatchFormat::encoder, pair, heads);
    CHECK(heads[0].name == "blocks.0.attn.h0");
    CHECK_THAT(all[0], WithinAbs(1, 1e-6));
    CHECK_THAT(all[1], WithinAbs(0, 1e-6));
    const std::vector<Patch> each = head_patches(c, BatchFormat::encoder, pair, true);
    REQUIRE(each.size() == 2 * 6);
    const std::vector<double> f = restored(*model, BatchFormat::encoder, pair, each);
    for (size_t p = 0; p < each.size(); ++p) {
      INFO(each[p].name << " at " << each[p].position);
      const bool source = each[p].name == "blocks.0.attn.h0" && each[p].position == static_cast<int64_t>(k + 1);
      CHECK_THAT(f[p], WithinAbs(source ? 1 : 0, 1e-6));
    }
    const std::vector<Patch> residual = residual_patches(c, BatchFormat::encoder, pair);
    REQUIRE(residual.size() == 2 * 6);  // resid_pre and resid_post of the one block, 6 positions each
    const std::vector<double> r = restored(*model, BatchFormat::encoder, pair, residual);
    for (size_t p = 0; p < residual.size(); ++p) {
      INFO(residual[p].name << " at " << residual[p].position);
      const size_t carrier = residual[p].name == "blocks.0.resid_pre" ? k : k + 1;
      CHECK_THAT(r[p], WithinAbs(residual[p].position == static_cast<int64_t>(carrier) ? 1 : 0, 1e-6));
    }
  }
}

TEST_CASE("nothing patched restores 0 and the whole input 1, on the hand-built model and on random models of each kind") {
  {
    std::unique_ptr<SequenceModel> model = testing::previous_token_model();
    const Example clean = testing::previous_token_examples(1, 9)[0];
    const PatchingPair pair = patching_pair(BatchFormat::encoder, clean, corrupt_at(clean, 2));
    const std::vector<double> f = restored(*model, BatchFormat::encoder, pair, {nothing(), everything(model->config())});
    CHECK_THAT(f[0], WithinAbs(0, 1e-6));
    CHECK_THAT(f[1], WithinAbs(1, 1e-6));
  }
  for (const std::string arch : {"encoder", "decoder", "seq2seq"}) {
    INFO(arch);
    std::unique_ptr<SequenceModel> model = make_model(testing::model_config(arch, 10, 16, 16, 2, 2, 32), 11);
    const BatchFormat format = batch_format(model->config(), false);
    // Any answers will do: the metric reads their logits.
    const Example clean{{4, 5, 6, 7}, {8, 9, 4, 5}}, corrupt{{4, 9, 6, 7}, {8, 6, 7, 5}};
    const PatchingPair pair = patching_pair(format, clean, corrupt);
    CHECK(pair.answers.size() == 2);
    const PatchingRun run = run_patching(*model, format, {pair}, {nothing(), everything(model->config())});
    for (size_t s = 0; s < 2; ++s) {
      const std::vector<double> f = fractions_restored(ld_sums(run, 0, static_cast<int64_t>(s)));
      CHECK_THAT(f[0], WithinAbs(0, 1e-6));
      CHECK_THAT(f[1], WithinAbs(1, 1e-6));
    }
  }
}

TEST_CASE("the answer positions of a pair: rows of each layout, equal answers left out, bad pairs refused") {
  const Example clean{{4, 5, 6}, {6, 5, 4}}, corrupt{{4, 7, 6}, {6, 7, 4}};
  const std::vector<std::pair<BatchFormat, int64_t>> rows = {
      {BatchFormat::encoder, 1}, {BatchFormat::decoder, 5}, {BatchFormat::seq2seq, 1}, {BatchFormat::bare, 3}};
  for (const auto& [format, row] : rows) {
    const PatchingPair pair = patching_pair(format, clean, corrupt);
    REQUIRE(pair.answers.size() == 1);  // answer position 1 only: 6 and 4 agree
    CHECK(pair.answers[0].index == 1);
    CHECK(pair.answers[0].row == row);  // decoder: [bos] 4 5 6 [sep] 6 | 5 predicted at row 5
    CHECK(pair.answers[0].clean == 5);
    CHECK(pair.answers[0].corrupt == 7);
    CHECK(pair.answer == clean.output);  // both runs read the clean answer
  }
  const PatchingPair lm = patching_pair(BatchFormat::lm, {{4, 5, 6}, {7}}, {{4, 8, 6}, {9}});
  REQUIRE(lm.answers.size() == 1);
  CHECK(lm.answers[0].row == 2);  // the next token after the text
  CHECK_THROWS_WITH(patching_pair(BatchFormat::encoder, clean, {{4, 7}, {4, 7}}),
                    "the clean and corrupted inputs differ in length (clean 3 tokens, corrupt 2 tokens): patching copies "
                    "activations position by position and needs equal lengths");
  CHECK_THROWS_WITH(patching_pair(BatchFormat::decoder, clean, {{4, 4, 6}, {6, 5, 4}}),
                    "the clean and corrupted inputs have the same answer at every position: nothing to restore");
}

TEST_CASE("logit differences and the fraction restored, by hand on small logits") {
  // logits (2, 2, 3): row b, position t, token v = 10b + 3t + v squared, so every difference is distinct.
  std::vector<Real> values;
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 2; ++t)
      for (int v = 0; v < 3; ++v) values.push_back(static_cast<Real>((10 * b + 3 * t + v) * (10 * b + 3 * t + v)));
  const Tensor logits = Tensor::from({2, 2, 3}, values);
  CHECK(logit_difference(logits, 1, {1, 0, 2, 0}) == 15 * 15 - 13 * 13);  // b 1, t 1: tokens 2 and 0
  CHECK(logit_difference(logits, 0, {0, 0, 1, 2}) == 1 - 4);
  CHECK(fraction_restored(3, 5, 1) == 0.5);
  CHECK(fraction_restored(1, 5, 1) == 0);
  CHECK(fraction_restored(-3, 5, 1) == -1);  // a patch can push away from the clean answer
  CHECK(std::isnan(fraction_restored(2, 1, 1)));
  // Two pairs, the first with two answer positions: LDs summed per pair, averaged over pairs, then the ratio.
  PatchingRun run;
  run.pairs = {{{4, 0, {1}}, {2, 0, {2}}}, {{1, 1, {1}}}};
  const LdSums all = ld_sums(run);
  CHECK(all.clean == 3.5);    // (4 + 2 + 1) / 2
  CHECK(all.corrupt == 0.5);  // (0 + 0 + 1) / 2
  CHECK(all.patched[0] == 2);  // (1 + 2 + 1) / 2
  CHECK(fractions_restored(all)[0] == 0.5);
  CHECK(fractions_restored(ld_sums(run, 0, 1))[0] == 1);
  CHECK(std::isnan(fractions_restored(ld_sums(run, 1))[0]));
}

TEST_CASE("patched rows batched together give each row's own patch, as one row at a time, over several pairs") {
  std::unique_ptr<SequenceModel> model = make_model(testing::model_config("seq2seq", 10, 16, 16, 2, 2, 32), 4);
  const TransformerConfig& c = model->config();
  const std::vector<PatchingPair> pairs = {patching_pair(BatchFormat::seq2seq, {{4, 5, 6}, {6, 5, 4}}, {{4, 7, 6}, {6, 7, 4}}),
                                           patching_pair(BatchFormat::seq2seq, {{8, 5, 9}, {9, 5, 8}}, {{8, 5, 4}, {4, 5, 8}})};
  std::vector<Patch> patches = residual_patches(c, BatchFormat::seq2seq, pairs[0]);
  const std::vector<Patch> heads = head_patches(c, BatchFormat::seq2seq, pairs[0], true);
  patches.insert(patches.end(), heads.begin(), heads.end());
  PatchingOptions one_row;
  one_row.rows_per_forward = 1;
  one_row.keep_logits = true;
  const PatchingRun batched = run_patching(*model, BatchFormat::seq2seq, pairs, patches);
  const PatchingRun single = run_patching(*model, BatchFormat::seq2seq, pairs, patches, one_row);
  for (size_t i = 0; i < pairs.size(); ++i)
    for (size_t s = 0; s < pairs[i].answers.size(); ++s)
      for (size_t p = 0; p < patches.size(); ++p)
        CHECK_THAT(batched.pairs[i][s].patched[p], WithinAbs(single.pairs[i][s].patched[p], 1e-5));
  // Each pair's own LDs: the sums of the two pairs average them.
  const LdSums both = ld_sums(batched), first = ld_sums(batched, 0), second = ld_sums(batched, 1);
  CHECK_THAT(both.clean, WithinAbs((first.clean + second.clean) / 2, 1e-9));
  CHECK(single.patched_logits.size() == patches.size() * pairs.size());
  CHECK_THROWS_WITH(run_patching(*model, BatchFormat::seq2seq, {pairs[0], patching_pair(BatchFormat::seq2seq, {{4, 5}, {5, 4}}, {{4, 6}, {6, 4}})}, patches),
                    "patched pairs must share their input and answer lengths: 2 and 2 against 3 and 3");
}
