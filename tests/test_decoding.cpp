// Decoding written once (models/decoding.cpp): sampling over the KV cache
// against the uncached reference, the sampler's rules, and decoding with
// hooks set.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "models/sampling.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"

using namespace attnlab;

namespace {

using Sources = std::vector<std::vector<int32_t>>;

// Scaled weights: decisive logits, so that answers vary with the input.
std::unique_ptr<SequenceModel> decoder(const std::string& arch, uint64_t seed) {
  auto model = make_model(testing::model_config(arch, 12, 24, 16, 4, 2, 32), seed);
  for (Var p : model->parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.value()[i] *= 3;
  return model;
}

}  // namespace

TEST_CASE("sampling over the KV cache draws the uncached tokens for the same seed, raw and prompted", "[decoding]") {
  for (const std::string arch : {"decoder", "seq2seq"}) {
    auto model = decoder(arch, 5);
    const Sources sources = {{4, 5, 6}, {7, 8, 9, 10, 11}};
    for (uint64_t seed : {1u, 2u, 3u}) {
      for (bool raw : {false, true}) {
        if (raw && arch == "seq2seq") continue;  // a seq2seq decoder always starts at [bos]
        INFO(arch << " seed " << seed << (raw ? " raw" : " prompted"));
        Rng cached_rng(seed), uncached_rng(seed);
        DecodeOptions cached, uncached;
        cached.raw_prompts = uncached.raw_prompts = raw;
        cached.choose = token_sampler(1.0, 0, cached_rng);
        uncached.choose = token_sampler(1.0, 0, uncached_rng);
        uncached.cached = false;
        // One source per call, as attnlab sample decodes: in a batch the paths call the chooser in
        // other orders (cached steps go by position, uncached ones by token).
        for (const auto& source : sources) {
          const Sources a = model->generate({source}, {12}, cached), b = model->generate({source}, {12}, uncached);
          CHECK(a == b);
          CHECK(a[0].size() == 12);  // the sampler never draws eos
        }
      }
    }
  }
}

TEST_CASE("the sampler draws no special token, and temperature 0 and top-k 1 take the most likely, ties by id",
          "[decoding]") {
  Rng rng(7);
  const std::vector<Real> logits = {9, 9, 9, 9, 1, 3, 3, 2};  // specials 0..3 most likely, then 5 and 6 tie
  CHECK(token_sampler(0, 0, rng)(logits.data(), 8) == 5);
  for (int i = 0; i < 20; ++i) CHECK(token_sampler(2.0, 1, rng)(logits.data(), 8) == 5);
  for (int i = 0; i < 50; ++i) CHECK(token_sampler(5.0, 0, rng)(logits.data(), 8) >= SpecialTokens::count);
}

TEST_CASE("with a hook set, greedy decodes uncached, each token's forward passing the hook points", "[decoding]") {
  auto model = decoder("decoder", 9);
  const Sources sources = {{4, 5, 6}};
  const Sources plain = model->greedy(sources, 4);
  int forwards = 0;
  model->hooks().observe("logits", [&forwards](const std::string&, const Var&) { ++forwards; });
  CHECK(model->greedy(sources, 4) == plain);
  CHECK(forwards == static_cast<int>(plain[0].size()) + (plain[0].size() < 4 ? 1 : 0));
  CHECK_THROWS_WITH(make_model(testing::model_config("encoder", 12, 24, 16, 4, 2, 32), 1)->generate(sources, {3}),
                    Catch::Contains("does not decode"));
}
