// Joint knock-outs (interventions/ablation.h, ablate_groups): a group's
// components knocked out at the same time, against what is known by
// construction (the hand-built model), the same heads' columns of out_proj
// zeroed, and mean and resample done by hand with hooks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "framework/random.h"
#include "interventions/ablation.h"
#include "tests/fixtures.h"
#include "tests/ablation_logits.h"
#include "tests/hand_built_model.h"

using namespace attnlab;
using attnlab::testing::bitwise_equal;
using attnlab::testing::Logits;

namespace {


double max_abs_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].shape() == b[i].shape());
    for (int64_t j = 0; j < a[i].numel(); ++j) m = std::max(m, static_cast<double>(std::abs(a[i][j] - b[i][j])));
  }
  return m;
}

// Random inputs of 4 symbols answered by themselves reversed: no padding in any stream.
std::vector<Example> reversal_examples(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<Example> out(static_cast<size_t>(n));
  for (Example& e : out) {
    for (int t = 0; t < 4; ++t) e.input.push_back(static_cast<int32_t>(rng.integer(SpecialTokens::count, 11)));
    e.output.assign(e.input.rbegin(), e.input.rend());
  }
  return out;
}

struct RandomModel {
  std::string arch;
  std::unique_ptr<SequenceModel> model;
  TeacherForcedSet set;
  RandomModel(const std::string& a, Norm norm) : arch(a) {
    TransformerConfig c = testing::model_config(a, 12, 16, 16, 4, 2, 32);  // d_v = 4
    c.norm = norm;
    model = make_model(c, 11);
    set = teacher_forced_set(c, false, reversal_examples(20, 3), 8);  // three batches, the last short
  }
  std::vector<Component> named(const std::vector<std::string>& names) const {
    return components_named(model->config(), names);
  }
  std::string attention() const { return arch == "seq2seq" ? "decoder.blocks.1.cross_attn" : "blocks.1.attn"; }
};

// The model's logits (B, T, V) of each batch, no hook set.
std::vector<Tensor> plain_logits(SequenceModel& model, const TeacherForcedSet& set) {
  InferenceGuard guard(model);
  std::vector<Tensor> out;
  for (const FormattedBatch& b : set.batches) out.push_back(model.forward(b.input).value());
  return out;
}

std::vector<RandomModel> every_kind() {
  std::vector<RandomModel> out;
  for (const std::string arch : {"encoder", "decoder", "seq2seq"})
    for (Norm norm : {Norm::pre, Norm::post}) out.emplace_back(arch, norm);
  return out;
}

const AblationMode kModes[] = {AblationMode::zero, AblationMode::mean, AblationMode::resample};

}  // namespace

TEST_CASE("on the hand-built model, heads 0 and 1 together are head 0 alone and head 1 with the MLP is intact, bitwise") {
  auto model = testing::previous_token_model();
  const TeacherForcedSet set = teacher_forced_set(model->config(), false, testing::previous_token_examples(40, 7), 16);
  const auto named = [&](const std::vector<std::string>& names) { return components_named(model->config(), names); };
  for (AblationMode mode : kModes) {
    INFO(name_of(mode));
    Logits logits;
    const AblationResult r = ablate_groups(*model, set,
                                           {named({"blocks.0.attn.h0"}), named({"blocks.0.attn.h0", "blocks.0.attn.h1"}),
                                            named({"blocks.0.attn.h1", "blocks.0.mlp"})},
                                           mode, 4, logits.sink());
    REQUIRE(r.rows.size() == 3);
    CHECK(r.rows[1].name() == "blocks.0.attn.h0 + blocks.0.attn.h1");
    CHECK(r.rows[2].name() == "blocks.0.attn.h1 + blocks.0.mlp");
    CHECK(bitwise_equal(logits.by_row[1], logits.by_row[0]));
    CHECK(bitwise_equal(logits.by_row[2], logits.by_row[-1]));
    CHECK_FALSE(bitwise_equal(logits.by_row[1], logits.by_row[-1]));
    CHECK(r.rows[1].score.token < 0.5);
    CHECK(model->hooks().empty());
  }
}

TEST_CASE("zeroing heads 0 and 2 of one attention together equals zeroing their columns of out_proj, on every model kind") {
  for (RandomModel& m : every_kind()) {
    INFO(m.arch << (m.model->config().norm == Norm::pre ? " pre-LN" : " post-LN"));
    const std::vector<Tensor> plain = plain_logits(*m.model, m.set);
    Logits logits;
    ablate_groups(*m.model, m.set, {m.named({m.attention() + ".h0", m.attention() + ".h2"})}, AblationMode::zero, 0,
                  logits.sink());
    CHECK(bitwise_equal(logits.by_row[-1], plain));
    auto edited = make_model(m.model->config(), 11);  // the same seed: the same weights
    Tensor& w = edited->parameter(m.attention() + ".out_proj.weight").value();  // (d, h·d_v)
    for (int64_t r = 0; r < w.size(0); ++r)
      for (int64_t head : {0, 2})
        for (int64_t j = head * 4; j < (head + 1) * 4; ++j) w[r * w.size(1) + j] = 0;
    const std::vector<Tensor> expected = plain_logits(*edited, m.set);
    CHECK(max_abs_diff(logits.by_row[0], plain) > 1e-4);  // the heads mattered
    CHECK(max_abs_diff(logits.by_row[0], expected) < 1e-5);
  }
}

TEST_CASE("a head or an MLP grouped with its own layer is the layer alone, and a component named twice is knocked out once") {
  for (RandomModel& m : every_kind()) {
    const std::string block = m.arch == "seq2seq" ? "decoder.blocks.0" : "blocks.0";
    const std::string head = block + (m.arch == "seq2seq" ? ".self_attn.h1" : ".attn.h1");
    for (AblationMode mode : kModes) {
      INFO(m.arch << " " << name_of(mode));
      Logits logits;
      ablate_groups(*m.model, m.set,
                    {m.named({block}), m.named({head, block}), m.named({block + ".mlp", block}), m.named({head}),
                     m.named({head, head})},
                    mode, 2, logits.sink());
      CHECK(bitwise_equal(logits.by_row[1], logits.by_row[0]));
      CHECK(bitwise_equal(logits.by_row[2], logits.by_row[0]));
      CHECK(bitwise_equal(logits.by_row[4], logits.by_row[3]));
      CHECK_FALSE(bitwise_equal(logits.by_row[3], logits.by_row[0]));
    }
  }
}

namespace {

// Each batch's value (B, T, w) of `point` in the intact pass.
std::vector<Tensor> record(SequenceModel& model, const TeacherForcedSet& set, const std::string& point) {
  std::vector<Tensor> out;
  model.hooks().observe(point, [&](const std::string&, const Var& v) { out.push_back(v.value()); });
  InferenceGuard guard(model);
  for (const FormattedBatch& b : set.batches) model.forward(b.input);
  model.hooks().clear();
  return out;
}

// The source row of example (batch j, row b) at t as the test computes it: mean over the
// set's examples (none is padded here), or the donor's value.
std::vector<double> source_row(const std::vector<Tensor>& values, const TeacherForcedSet& set, AblationMode mode,
                               const std::vector<size_t>& donors, size_t j, int64_t b, int64_t t) {
  const int64_t T = values[0].size(1), w = values[0].size(2);
  std::vector<double> out(static_cast<size_t>(w), 0.0);
  if (mode == AblationMode::resample) {
    const size_t d = donors[set.first[j] + static_cast<size_t>(b)], dj = d / 8;  // 8 a batch
    for (int64_t k = 0; k < w; ++k) out[static_cast<size_t>(k)] = values[dj][((d % 8) * T + t) * w + k];
    return out;
  }
  for (const Tensor& v : values)
    for (int64_t i = 0; i < v.size(0); ++i)
      for (int64_t k = 0; k < w; ++k) out[static_cast<size_t>(k)] += v[(i * T + t) * w + k];
  for (double& x : out) x /= static_cast<double>(set.examples);
  return out;
}

// Replaces `point`'s columns [begin, end) by the source rows, batch by batch (current: the batch).
void replace_by_hand(SequenceModel& model, const std::string& point, const std::vector<Tensor>& values,
                     const TeacherForcedSet& set, AblationMode mode, const std::vector<size_t>& donors,
                     const std::vector<std::pair<int64_t, int64_t>>& columns, const size_t& current) {
  model.hooks().replace(point, [=, &set, &current](const std::string&, const Var& v) {
    Tensor x = v.value();  // (B, T, w)
    const int64_t B = x.size(0), T = x.size(1), w = x.size(2);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const std::vector<double> row = source_row(values, set, mode, donors, current, b, t);
        for (const auto& [begin, end] : columns)
          for (int64_t k = begin; k < end; ++k) x[(b * T + t) * w + k] = static_cast<Real>(row[static_cast<size_t>(k)]);
      }
    return Var(x);
  });
}

}  // namespace

TEST_CASE("mean and resample of a group equal the same knock-outs done by hand with hooks") {
  for (RandomModel& m : every_kind()) {
    const std::string attention = m.attention();
    const std::string mlp = m.arch == "seq2seq" ? "encoder.blocks.0.mlp" : "blocks.0.mlp";
    const std::vector<Tensor> z = record(*m.model, m.set, attention + ".z"), out = record(*m.model, m.set, mlp + ".out");
    for (AblationMode mode : {AblationMode::mean, AblationMode::resample}) {
      INFO(m.arch << " " << name_of(mode));
      Logits logits;
      ablate_groups(*m.model, m.set, {m.named({attention + ".h0", mlp, attention + ".h2"})}, mode, 6, logits.sink());
      const std::vector<size_t> donors = resample_donors(m.set, 6);
      size_t current = 0;
      replace_by_hand(*m.model, attention + ".z", z, m.set, mode, donors, {{0, 4}, {8, 12}}, current);
      replace_by_hand(*m.model, mlp + ".out", out, m.set, mode, donors, {{0, 16}}, current);
      std::vector<Tensor> by_hand;
      {
        InferenceGuard guard(*m.model);
        for (current = 0; current < m.set.batches.size(); ++current)
          by_hand.push_back(m.model->forward(m.set.batches[current].input).value());
      }
      m.model->hooks().clear();
      CHECK(max_abs_diff(logits.by_row[0], logits.by_row[-1]) > 1e-4);
      CHECK(max_abs_diff(logits.by_row[0], by_hand) < 1e-6);
    }
  }
}
