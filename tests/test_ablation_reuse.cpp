// Reusing the shared prefix (interventions/ablation.h, reuse_prefix): a row's
// pass runs SequenceModel::forward_from its earliest block, from the residual
// stream the intact pass recorded, and must give the full pass's logits
// bitwise: on every model kind, pre- and post-LN, for every component of
// every block and group, in each mode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "framework/error.h"
#include "framework/random.h"
#include "interventions/ablation.h"
#include "tests/fixtures.h"

using namespace attnlab;

namespace {

struct Kind {
  std::string arch;
  Norm norm;
  Positional positional;
};

std::vector<Kind> every_kind() {
  std::vector<Kind> kinds;
  for (const std::string arch : {"encoder", "decoder", "seq2seq"})
    for (Norm norm : {Norm::pre, Norm::post}) kinds.push_back({arch, norm, Positional::sinusoidal});
  kinds.push_back({"decoder", Norm::pre, Positional::rope});
  return kinds;
}

std::unique_ptr<SequenceModel> model_of(const Kind& k) {
  TransformerConfig c = testing::model_config(k.arch, 12, 16, 16, 4, 3, 32);
  c.norm = k.norm;
  c.positional = k.positional;
  return make_model(c, 11);
}

// Inputs of 3 to 5 symbols answered by themselves reversed: the streams are padded.
std::vector<Example> reversal_examples(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<Example> out(static_cast<size_t>(n));
  for (Example& e : out) {
    const int64_t length = rng.integer(3, 5);
    for (int64_t t = 0; t < length; ++t) e.input.push_back(static_cast<int32_t>(rng.integer(SpecialTokens::count, 11)));
    e.output.assign(e.input.rbegin(), e.input.rend());
  }
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::equal(a.data(), a.data() + a.numel(), b.data());
}

// Every pass's logits by row (-1: intact), batch after batch; with `embeds`, how many
// batches of each row after its first passed the embedding (an observer added from the
// first batch's logits on: ablate clears it after the row).
struct Logits {
  std::map<int64_t, std::vector<Tensor>> by_row;
  std::map<int64_t, int64_t> embeds;
  AblationLogits sink(SequenceModel& model, const std::string& embed) {
    return [this, &model, embed](int64_t row, size_t batch, const Tensor& t) {
      by_row[row].push_back(t);
      if (row >= 0 && batch == 0)
        model.hooks().observe(embed, [this, row](const std::string&, const Var&) { ++embeds[row]; });
    };
  }
};

}  // namespace

TEST_CASE("forward_from any block's recorded input gives forward's logits bitwise, on every model kind") {
  for (const Kind& kind : every_kind()) {
    auto model = model_of(kind);
    const TeacherForcedSet set = teacher_forced_set(model->config(), false, reversal_examples(6, 2), 6);
    const ModelInput& in = set.batches[0].input;
    std::map<std::string, Tensor> seen;
    for (const std::string& name : model->hooks().names())
      if (name.find("resid_pre") != std::string::npos || name == "encoder.ln_final")
        model->hooks().observe(name, [&seen](const std::string& n, const Var& v) { seen[n] = v.value(); });
    InferenceGuard guard(*model);
    const Tensor full = model->forward(in).value();
    model->hooks().clear();
    const std::vector<std::string> stacks =
        kind.arch == "seq2seq" ? std::vector<std::string>{"encoder.", "decoder."} : std::vector<std::string>{""};
    for (const std::string& stack : stacks)
      for (int64_t block = 0; block < 3; ++block) {
        INFO(kind.arch << (kind.norm == Norm::pre ? " pre-LN " : " post-LN ") << stack << block);
        const Var resid(seen.at(stack + "blocks." + std::to_string(block) + ".resid_pre"));
        const Var memory = stack == "decoder." ? Var(seen.at("encoder.ln_final")) : Var();
        CHECK(bitwise_equal(model->forward_from(in, stack, block, resid, memory).value(), full));
      }
    CHECK_THROWS_WITH(model->forward_from(in, "x.", 0, Var(seen.begin()->second)),
                      "forward_from: this model has no block 'x.blocks.0' (blocks 0-2)");
    CHECK_THROWS_WITH(model->forward_from(in, stacks[0], 3, Var(seen.begin()->second)),
                      "forward_from: this model has no block '" + stacks[0] + "blocks.3' (blocks 0-2)");
  }
}

TEST_CASE("ablation reusing the shared prefix gives the full passes' logits bitwise, for every component and mode") {
  for (const Kind& kind : every_kind()) {
    auto model = model_of(kind);
    const TransformerConfig& c = model->config();
    const TeacherForcedSet set = teacher_forced_set(c, false, reversal_examples(20, 5), 8);  // 8, 8, 4
    std::vector<std::vector<Component>> groups;
    for (const Component& k : model_components(c)) groups.push_back({k});
    const std::vector<Component> all = model_components(c);
    groups.push_back({all.back(), all[7]});  // the last block with a head of block 1 (seq2seq: of the encoder)
    groups.push_back({all[all.size() - 2], all[all.size() - 3]});  // the last block's MLP and a head
    const std::string embed = kind.arch == "seq2seq" ? "decoder.embed" : "embed";
    for (AblationMode mode : {AblationMode::zero, AblationMode::mean, AblationMode::resample}) {
      INFO(kind.arch << (kind.norm == Norm::pre ? " pre-LN " : " post-LN ") << name_of(mode));
      Logits reused, full;
      const AblationResult a = ablate_groups(*model, set, groups, mode, 3, reused.sink(*model, embed), true);
      const AblationResult b = ablate_groups(*model, set, groups, mode, 3, full.sink(*model, embed), false);
      REQUIRE(reused.by_row.size() == groups.size() + 1);
      for (const auto& [row, logits] : full.by_row) {
        INFO("row " << row << (row >= 0 ? " " + a.rows[static_cast<size_t>(row)].name() : std::string()));
        REQUIRE(reused.by_row[row].size() == logits.size());
        for (size_t j = 0; j < logits.size(); ++j) CHECK(bitwise_equal(reused.by_row[row][j], logits[j]));
        if (row < 0) continue;
        CHECK(a.rows[static_cast<size_t>(row)].score.loss == b.rows[static_cast<size_t>(row)].score.loss);
        // The full passes embed every batch; a reusing pass only from block 0 of the stack
        // whose embedding this is (a seq2seq decoder row reuses the encoder, not this).
        const std::vector<Component>& g = groups[static_cast<size_t>(row)];
        const bool from_embedding = std::any_of(g.begin(), g.end(), [&](const Component& k) {
          return kind.arch == "seq2seq" ? k.stack == "encoder." : k.block == 0;
        });
        CHECK(full.embeds[row] == 2);
        CHECK(reused.embeds[row] == (from_embedding ? 2 : 0));
      }
    }
  }
}
