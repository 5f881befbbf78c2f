// Ablation (interventions/ablation.h) on the hand-built previous-token model
// (tests/hand_built_model.h), whose components' roles are known by
// construction: what each knock-out must do, figure by figure.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "framework/error.h"
#include "interventions/ablation.h"
#include "tests/ablation_logits.h"
#include "tests/hand_built_model.h"

using namespace attnlab;
using attnlab::testing::bitwise_equal;
using attnlab::testing::Logits;
using attnlab::testing::kHandPositions;

namespace {

constexpr int64_t kExamples = 40, kBatch = 16;  // three batches, the last short

struct HandBuilt {
  std::unique_ptr<SequenceModel> model = testing::previous_token_model();
  std::vector<Example> examples = testing::previous_token_examples(kExamples, 7);
  TeacherForcedSet set = teacher_forced_set(model->config(), false, examples, kBatch);

  std::vector<Component> named(const std::vector<std::string>& names) { return components_named(model->config(), names); }
  AblationResult run(const std::vector<std::string>& names, AblationMode mode, uint64_t seed = 1,
                     const AblationLogits& logits = nullptr) {
    return ablate(*model, set, named(names), mode, seed, logits);
  }
};

// The token position p answers with: the one before it (position 0: itself).
size_t source_of(int64_t p) { return static_cast<size_t>(std::max<int64_t>(p - 1, 0)); }


}  // namespace

TEST_CASE("zeroing head 0 (the previous-token head) or its layer destroys the answers, while head 1 and the MLP change no logit") {
  HandBuilt h;
  Logits logits;
  const AblationResult r = h.run({"blocks.0.attn.h0", "blocks.0.attn.h1", "blocks.0.mlp", "blocks.0"}, AblationMode::zero,
                                 1, logits.sink());
  CHECK(r.intact.token == 1.0);
  CHECK(r.intact.exact == 1.0);
  CHECK(r.intact.sequences == kExamples);
  CHECK(r.intact.tokens == kExamples * kHandPositions);
  // Without head 0 the answer subspace is empty: after ln_f every answer dim has the same
  // value, so all 8 logits are equal: the loss is ln 8 (uniform over V = 8) and the argmax is
  // the first id, 0, never an answer (symbols are ids 4-7): chance here is 0, not 1/4.
  for (size_t k : {size_t(0), size_t(3)}) {
    INFO(r.rows[k].name());
    CHECK(r.rows[k].score.token == 0.0);
    CHECK(r.rows[k].score.exact == 0.0);
    CHECK(r.rows[k].score.loss == Approx(std::log(8.0)).margin(1e-6));
  }
  // Head 1 writes nothing and the MLP's output is 0: knocking them out changes no bit.
  CHECK(bitwise_equal(logits.by_row[1], logits.by_row[-1]));
  CHECK(bitwise_equal(logits.by_row[2], logits.by_row[-1]));
  CHECK_FALSE(bitwise_equal(logits.by_row[0], logits.by_row[-1]));
  CHECK(r.rows[1].score.loss == r.intact.loss);
  CHECK(r.rows[2].score.token == 1.0);
}

TEST_CASE("mean-ablating head 0 answers every position with the token most frequent before it in the set") {
  HandBuilt h;
  // Head 0's output at p becomes the mean of the previous token's one-hot over the set: the
  // model answers the most frequent token at position max(p - 1, 0), right for exactly the
  // examples that have it there.
  int64_t right = 0;
  for (int64_t p = 0; p < kHandPositions; ++p) {
    std::map<int32_t, int64_t> counts;
    for (const Example& e : h.examples) ++counts[e.input[source_of(p)]];
    int64_t most = 0;
    for (const auto& [token, n] : counts) most = std::max(most, n);
    right += most;
  }
  const AblationResult r = h.run({"blocks.0.attn.h0", "blocks.0.attn.h1", "blocks.0.mlp"}, AblationMode::mean);
  CHECK(r.rows[0].score.token == Approx(static_cast<double>(right) / (kExamples * kHandPositions)).epsilon(1e-12));
  CHECK(r.rows[0].score.token < 0.5);
  // What head 1 and the MLP put in is their own mean: still no logit changes.
  CHECK(r.rows[1].score.loss == r.intact.loss);
  CHECK(r.rows[2].score.loss == r.intact.loss);
}

TEST_CASE("resample-ablating head 0 answers each example with its donor's previous tokens") {
  HandBuilt h;
  const std::vector<size_t> donors = resample_donors(h.set, 5);
  int64_t right = 0, exact = 0;
  for (size_t i = 0; i < h.examples.size(); ++i) {
    bool all = true;
    for (int64_t p = 0; p < kHandPositions; ++p) {
      const bool same = h.examples[i].input[source_of(p)] == h.examples[donors[i]].input[source_of(p)];
      right += same;
      all = all && same;
    }
    exact += all;
  }
  const AblationResult r = h.run({"blocks.0.attn.h0", "blocks.0.attn.h1"}, AblationMode::resample, 5);
  CHECK(r.rows[0].score.token == Approx(static_cast<double>(right) / (kExamples * kHandPositions)).epsilon(1e-12));
  CHECK(r.rows[0].score.exact == Approx(static_cast<double>(exact) / kExamples).epsilon(1e-12));
  CHECK(r.rows[0].score.token < 0.5);
  CHECK(r.rows[1].score.loss == r.intact.loss);
}

TEST_CASE("resample's donors: a seeded cycle among the examples of the same lengths, nobody its own donor") {
  HandBuilt h;
  // Examples of lengths 6, 4 and one of length 2 (unique): the encoder pads them in their batch.
  for (size_t i = 0; i < h.examples.size(); i += 3) {
    h.examples[i].input.resize(4);
    h.examples[i].output.resize(4);
  }
  h.examples[1].input.resize(2);
  h.examples[1].output.resize(2);
  const TeacherForcedSet set = teacher_forced_set(h.model->config(), false, h.examples, kBatch);
  const std::vector<StreamLengths> lengths = stream_lengths(set);
  CHECK(lengths[0].src == 4);
  CHECK(lengths[1].src == 2);
  CHECK(lengths[2].src == 6);
  const std::vector<size_t> donors = resample_donors(set, 3);
  CHECK(donors == resample_donors(set, 3));
  CHECK(donors != resample_donors(set, 4));
  std::set<size_t> taken;
  for (size_t i = 0; i < donors.size(); ++i) {
    CHECK(donors[i] != i);
    if (i != 1) CHECK(lengths[donors[i]] == lengths[i]);
    taken.insert(donors[i]);
  }
  CHECK(taken.size() == donors.size() - 1);  // a cycle per length; the unique one's donor also gives to its own group
  // The order is Fisher-Yates with Rng(seed), as documented: each takes the next of its lengths
  // in that order (the last the first), the unique one the next of the whole order.
  std::vector<size_t> order(donors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  Rng rng(3);
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(i)))]);
  const auto at = static_cast<size_t>(std::find(order.begin(), order.end(), size_t(1)) - order.begin());
  CHECK(donors[1] == order[(at + 1) % order.size()]);
  for (size_t k = 0; k < order.size(); ++k) {
    if (order[k] == 1) continue;
    size_t next = (k + 1) % order.size();
    while (order[next] == 1 || !(lengths[order[next]] == lengths[order[k]])) next = (next + 1) % order.size();
    CHECK(donors[order[k]] == order[next]);
  }
  CHECK_THROWS_WITH(resample_donors(teacher_forced_set(h.model->config(), false, {h.examples[0]}, 4), 0),
                    "resample-ablation needs at least 2 examples to draw donors from, got 1");
  // Padding and lengths do not break ablation: head 1 still changes nothing, head 0 still matters.
  const AblationResult r = ablate(*h.model, set, h.named({"blocks.0.attn.h1", "blocks.0.attn.h0"}), AblationMode::resample, 3);
  CHECK(r.intact.token == 1.0);
  CHECK(r.rows[0].score.loss == r.intact.loss);
  CHECK(r.rows[1].score.token < 0.6);
}

TEST_CASE("ablation is deterministic, and ablating nothing is the intact model bitwise") {
  HandBuilt h;
  for (AblationMode mode : {AblationMode::zero, AblationMode::mean, AblationMode::resample}) {
    INFO(name_of(mode));
    const AblationResult a = h.run({"blocks.0.attn.h0", "blocks.0"}, mode, 9), b = h.run({"blocks.0.attn.h0", "blocks.0"}, mode, 9);
    CHECK(a.intact.loss == b.intact.loss);
    for (size_t k = 0; k < a.rows.size(); ++k) {
      CHECK(a.rows[k].score.loss == b.rows[k].score.loss);
      CHECK(a.rows[k].score.token == b.rows[k].score.token);
    }
    const AblationResult none = h.run({}, mode);
    CHECK(none.rows.empty());
    const SetScore plain = score_set(*h.model, h.set);
    CHECK(none.intact.loss == plain.loss);
    CHECK(a.intact.loss == plain.loss);
    CHECK(h.model->hooks().empty());
  }
}
