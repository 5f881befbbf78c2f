// KV-cached greedy decoding (models/kv_cache.h, MultiHeadAttention::forward_step
// and forward_memory) against the uncached reference, which reruns the whole
// prefix for every token: the same answers, and the logits of every chosen
// token equal to within kLogitTol.
//
// Why a tolerance and not bitwise equality: the uncached path is not bitwise
// stable itself. A row's result in Eigen's products depends on the shape of
// the whole product (a 1-row product goes through GEMV, a small one through
// the coefficient-based product, a large one through GEBP whose register
// blocks accumulate differently for full and remainder panels), and the
// softmax sums a row of T_k entries with packet-wise partial sums whose
// grouping depends on T_k (the masked zeros of a padded batch change it).
// So the same sequence decoded alone or in a ragged batch already differs in
// the last bits, and the cached path, which multiplies (B, d) rows instead of (B·T, d), can
// match it only to rounding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "datasets/splits.h"
#include "datasets/task.h"
#include "framework/nn/multi_head_attention.h"
#include "framework/ops/loss.h"
#include "framework/optim/adam.h"
#include "models/batch.h"
#include "models/decoder_lm.h"
#include "models/encoder_decoder.h"
#include "tests/cli_harness.h"
#include "tests/fixtures.h"

using namespace attnlab;
using attnlab::testing::model_config;
using attnlab::testing::TempDir;

namespace {

// Float32 rounding through a few layers, relative to the largest |logit| of
// the row (scaled weights give logits in the hundreds): observed up to ~1e-6;
// a wrong position, a stale key or a missing mask moves logits by percents.
constexpr double kLogitTol = 2e-5;

using Sources = std::vector<std::vector<int32_t>>;
using Variant = std::function<void(TransformerConfig&)>;

struct NamedVariant {
  std::string name;
  Variant apply;
  // Whether scaled random weights give varied answers; parameter-free
  // attention's repeat their last token (the trained test covers it).
  bool answers_vary = true;
};

// Every option that changes what attention computes, one at a time and in pairs.
std::vector<NamedVariant> variants() {
  return {
      {"sinusoidal pre-LN", [](TransformerConfig&) {}},
      {"learned positions", [](TransformerConfig& c) { c.positional = Positional::learned; }},
      {"rope", [](TransformerConfig& c) { c.positional = Positional::rope; }},
      {"no positions", [](TransformerConfig& c) { c.positional = Positional::none; }},
      {"post-LN", [](TransformerConfig& c) { c.norm = Norm::post; }},
      {"post-LN rope", [](TransformerConfig& c) { c.norm = Norm::post; c.positional = Positional::rope; }},
      {"attn-scale none", [](TransformerConfig& c) { c.attn_scale = "none"; }},
      {"attn-scale 0.7 learned", [](TransformerConfig& c) { c.attn_scale = "0.7"; c.positional = Positional::learned; }},
      {"d_k 6 != d_v 10", [](TransformerConfig& c) { c.d_k = 6; c.d_v = 10; }},
      {"d_k 6 != d_v 10 rope", [](TransformerConfig& c) { c.d_k = 6; c.d_v = 10; c.positional = Positional::rope; }},
      {"tied embeddings", [](TransformerConfig& c) { c.tie_embeddings = true; }},
      {"parameter-free attention", [](TransformerConfig& c) { c.parameter_free_attention = true; }, false},
      {"parameter-free rope post-LN",
       [](TransformerConfig& c) {
         c.parameter_free_attention = true;
         c.positional = Positional::rope;
         c.norm = Norm::post;
       },
       false},
      {"gelu, one head", [](TransformerConfig& c) { c.activation = Activation::gelu; c.n_heads = 1; }},
      {"no norms", [](TransformerConfig& c) { c.norm = Norm::none; }},
      {"attention-only", [](TransformerConfig& c) { c.attention_only = true; }},
      {"attention-only post-LN", [](TransformerConfig& c) { c.attention_only = true; c.norm = Norm::post; }},
      {"no biases, gelu", [](TransformerConfig& c) { c.no_bias = true; c.activation = Activation::gelu; }},
      {"no norms, attention-only, no biases, rope",
       [](TransformerConfig& c) {
         c.norm = Norm::none;
         c.attention_only = true;
         c.no_bias = true;
         c.positional = Positional::rope;
       }},
  };
}

TransformerConfig small_config(const std::string& arch, const Variant& variant, int64_t max_len = 20) {
  TransformerConfig c = model_config(arch, 12, max_len, 16, 2, 2, 32);
  variant(c);
  return c;
}

// Untrained models tend to repeat one token; scaling every parameter up makes
// the logits depend strongly on position and context, so answers vary.
void scale_parameters(Module& model, Real factor) {
  for (auto& [name, p] : model.named_parameters())
    for (int64_t i = 0; i < p.value().numel(); ++i) p.value()[i] *= factor;
}

// A few Adam steps on `task`: answers that end with eos at different
// lengths, as a partly trained model gives.
void train_briefly(SequenceModel& model, const Task& task, int64_t steps) {
  OptimizerConfig oc;
  oc.kind = OptimizerKind::adam;
  oc.lr = 1e-2;
  Adam opt(model.named_parameters(), oc);
  Rng rng(7);
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<Example> batch;
    for (int i = 0; i < 16; ++i) batch.push_back(task.sample(rng));
    FormattedBatch fb = format_batch(batch_format(model.config(), false), to_pairs(batch));
    opt.zero_grad();
    backward(cross_entropy(model.forward(fb.input), fb.targets));
    opt.step();
  }
}

// Ragged sources of n sequences, lengths lo..hi, tokens 4..V-1.
Sources random_sources(size_t n, int64_t lo, int64_t hi, uint64_t seed, int64_t vocab = 12) {
  Rng rng(seed);
  Sources s(n);
  for (auto& seq : s) {
    const int64_t len = lo + static_cast<int64_t>(rng.uniform(0, 1) * static_cast<double>(hi - lo + 1)) % (hi - lo + 1);
    for (int64_t i = 0; i < len; ++i)
      seq.push_back(4 + static_cast<int32_t>(rng.uniform(0, 1) * static_cast<double>(vocab - 4)) % (vocab - 4));
  }
  return s;
}

// The largest |a - b| over every logit, relative to max(1, the row's largest |b|).
double max_logit_diff(const DecodeLogits& a, const DecodeLogits& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (size_t t = 0; t < a[i].size(); ++t) {
      REQUIRE(a[i][t].size() == b[i][t].size());
      double scale = 1, diff = 0;
      for (size_t j = 0; j < a[i][t].size(); ++j) {
        scale = std::max(scale, std::abs(static_cast<double>(b[i][t][j])));
        diff = std::max(diff, std::abs(static_cast<double>(a[i][t][j]) - static_cast<double>(b[i][t][j])));
      }
      worst = std::max(worst, diff / scale);
    }
  }
  return worst;
}

// Decodes with both paths and checks the answers equal and the logits close.
// Returns the answers (for checks that they are not trivial).
template <class Model>
Sources check_paths_agree(Model& model, const Sources& sources, int64_t max_new) {
  DecodeLogits cached_logits, uncached_logits;
  Sources cached = model.greedy_cached(sources, max_new, &cached_logits);
  Sources uncached = model.greedy_uncached(sources, max_new, &uncached_logits);
  CHECK(cached == uncached);
  const double diff = max_logit_diff(cached_logits, uncached_logits);
  INFO("max |cached - uncached| logit, relative = " << diff);
  CHECK(diff <= kLogitTol);
  CHECK(model.greedy(sources, max_new) == cached);  // greedy() is the cached path
  return cached;
}

// Not a trivial answer set: some token other than the most common one, and
// some answer longer than one token.
void check_answers_vary(const Sources& answers) {
  std::set<int32_t> tokens;
  size_t longest = 0;
  for (const auto& a : answers) {
    tokens.insert(a.begin(), a.end());
    longest = std::max(longest, a.size());
  }
  CHECK(tokens.size() >= 2);
  CHECK(longest >= 2);
}

template <class Model>
void check_every_batch_size(Model& model, uint64_t seed, int64_t lo, int64_t hi, bool answers_vary) {
  Sources all;
  for (size_t n : {size_t(1), size_t(3), size_t(8)}) {
    Sources s = random_sources(n, lo, hi, seed + n);
    Sources answers = check_paths_agree(model, s, 30);
    all.insert(all.end(), answers.begin(), answers.end());
  }
  if (answers_vary) check_answers_vary(all);
}

}  // namespace

TEST_CASE("cached decoder greedy gives the uncached answers and logits for every attention option, scaled weights",
          "[kv_cache]") {
  for (const auto& v : variants()) {
    DYNAMIC_SECTION(v.name) {
      DecoderLM model(small_config("decoder", v.apply), 11);
      scale_parameters(model, 2);
      check_every_batch_size(model, 100, 0, 9, v.answers_vary);
    }
  }
}

TEST_CASE("cached seq2seq greedy gives the uncached answers and logits for every attention option, scaled weights",
          "[kv_cache]") {
  for (const auto& v : variants()) {
    DYNAMIC_SECTION(v.name) {
      EncoderDecoder model(small_config("seq2seq", v.apply), 12);
      scale_parameters(model, 2);
      check_every_batch_size(model, 200, 0, 9, v.answers_vary);
    }
  }
}

TEST_CASE("cached greedy equals uncached on untrained weights (decoder and seq2seq)", "[kv_cache]") {
  for (const auto& v : variants()) {
    DYNAMIC_SECTION(v.name) {
      DecoderLM dec(small_config("decoder", v.apply), 21);
      EncoderDecoder s2s(small_config("seq2seq", v.apply), 22);
      const Sources s = random_sources(5, 1, 8, 300);
      check_paths_agree(dec, s, 12);
      check_paths_agree(s2s, s, 12);
    }
  }
}

TEST_CASE("cached greedy equals uncached on briefly trained models whose answers stop at eos at different lengths",
          "[kv_cache]") {
  for (const std::string arch : {"decoder", "seq2seq"}) {
    for (const auto& v : {variants()[0], variants()[2], variants()[4], variants()[8], variants()[11]}) {
      DYNAMIC_SECTION(arch << ", " << v.name) {
        auto model = make_model(small_config(arch, v.apply, 24), 31);
        train_briefly(*model, *make_task(attnlab::testing::task_config("reverse", 8, 3, 6)), 80);
        const Sources s = random_sources(12, 3, 6, 400);
        Sources answers = arch == "decoder" ? check_paths_agree(dynamic_cast<DecoderLM&>(*model), s, 10)
                                            : check_paths_agree(dynamic_cast<EncoderDecoder&>(*model), s, 10);
        std::set<size_t> lengths;
        for (const auto& a : answers) lengths.insert(a.size());
        CHECK(lengths.size() >= 2);  // stopped at eos after different numbers of tokens
        CHECK(*lengths.begin() < 10);  // some answer ended at eos before the limit
      }
    }
  }
}

namespace {

// Forbids eos, so every answer runs until max_new_tokens or the positional table ends.
void forbid_eos(SequenceModel& model) {
  for (auto& [name, p] : model.named_parameters())
    if (name == "head.bias") p.value()[SpecialTokens::eos] = -1e9f;
}

}  // namespace

TEST_CASE("cached decoding runs to the end of the positional table and stops there, as uncached", "[kv_cache]") {
  for (const auto& v : {variants()[0], variants()[1], variants()[2]}) {
    DYNAMIC_SECTION(v.name) {
      const int64_t max_len = 12;
      DecoderLM dec(small_config("decoder", v.apply, max_len), 41);
      forbid_eos(dec);
      // Prompts [bos] src [sep] of 12 (the whole table), 11, 9 and 3 positions.
      const Sources s = {std::vector<int32_t>(10, 5), std::vector<int32_t>(9, 6), std::vector<int32_t>(7, 7), {8}};
      const Sources answers = check_paths_agree(dec, s, 100);
      // The last token is chosen at position max_len - 1: 1, 2, 4 and 10 tokens.
      CHECK(answers[0].size() == 1);
      CHECK(answers[1].size() == 2);
      CHECK(answers[2].size() == 4);
      CHECK(answers[3].size() == 10);

      EncoderDecoder s2s(small_config("seq2seq", v.apply, max_len), 42);
      forbid_eos(s2s);
      for (int64_t max_new : {int64_t(5), max_len, int64_t(100)}) {
        const Sources out = check_paths_agree(s2s, {std::vector<int32_t>(12, 5), {6, 7}, {}}, max_new);
        for (const auto& a : out) CHECK(static_cast<int64_t>(a.size()) == std::min(max_new, max_len));
      }
    }
  }
}

TEST_CASE("cached answers of a sequence do not depend on its batch, nor on earlier calls", "[kv_cache]") {
  for (const auto& v : {variants()[1], variants()[2]}) {
    DYNAMIC_SECTION(v.name) {
      DecoderLM dec(small_config("decoder", v.apply), 51);
      EncoderDecoder s2s(small_config("seq2seq", v.apply), 52);
      scale_parameters(dec, 2);
      scale_parameters(s2s, 2);
      // A long batch first: a cache kept across calls would leave its keys behind.
      const Sources first = random_sources(9, 8, 12, 500);
      const Sources batch = random_sources(6, 0, 7, 501);
      dec.greedy(first, 20);
      s2s.greedy(first, 20);
      const Sources dec_batch = check_paths_agree(dec, batch, 15);
      const Sources s2s_batch = check_paths_agree(s2s, batch, 15);
      for (size_t i = 0; i < batch.size(); ++i) {
        CHECK(dec.greedy({batch[i]}, 15)[0] == dec_batch[i]);
        CHECK(s2s.greedy({batch[i]}, 15)[0] == s2s_batch[i]);
      }
      // The reverse order: each row reads its own slot.
      Sources reversed(batch.rbegin(), batch.rend());
      Sources dec_reversed = dec.greedy(reversed, 15);
      CHECK(Sources(dec_reversed.rbegin(), dec_reversed.rend()) == dec_batch);
    }
  }
}

TEST_CASE("cached greedy keeps the uncached limits: long prompts throw, no tokens asked gives empty answers, "
          "train mode is restored",
          "[kv_cache]") {
  DecoderLM dec(small_config("decoder", variants()[0].apply, 8), 61);
  EncoderDecoder s2s(small_config("seq2seq", variants()[0].apply, 8), 62);
  CHECK_THROWS_AS(dec.greedy_cached({{4, 5, 6, 7, 8, 9, 10}}, 3), ValueError);  // 9 positions > 8
  CHECK_THROWS_WITH(dec.greedy_cached({{4, 5, 6, 7, 8, 9, 10}}, 0), Catch::Contains("length 9"));
  CHECK_THROWS_WITH(s2s.greedy_cached({std::vector<int32_t>(9, 4)}, 3), Catch::Contains("length 9"));
  CHECK(dec.greedy_cached({{4}, {5, 6}}, 0) == Sources(2));
  CHECK(s2s.greedy_cached({{4}, {5, 6}}, 0) == Sources(2));
  CHECK(dec.greedy_cached({}, 5).empty());
  CHECK(s2s.greedy_cached({}, 5).empty());
  dec.train();
  s2s.train();
  dec.greedy_cached({{4, 5}}, 3);
  s2s.greedy_cached({{4, 5}}, 3);
  CHECK(dec.training());
  CHECK(s2s.training());
}

namespace {

MultiHeadAttentionOptions step_options(bool projections, bool rope, int64_t d_k, int64_t d_v) {
  MultiHeadAttentionOptions o;
  o.d_model = 8;
  o.n_heads = 2;
  o.d_k = d_k;
  o.d_v = d_v;
  o.projections = projections;
  o.rope = rope;
  return o;
}

Tensor random_tensor(Shape shape, Rng& rng) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.uniform(-2, 2));
  return t;
}

// Row t of x (B, T, d) as (B, 1, d).
Var position(const Tensor& x, int64_t t) {
  const int64_t b = x.size(0), n = x.size(1), d = x.size(2);
  Tensor row({b, 1, d});
  for (int64_t i = 0; i < b; ++i)
    std::copy(x.data() + (i * n + t) * d, x.data() + (i * n + t + 1) * d, row.data() + i * d);
  return Var(std::move(row));
}

// max |a[:, t, :] - b[:, 0, :]|
double row_diff(const Tensor& full, int64_t t, const Tensor& step) {
  const int64_t b = full.size(0), n = full.size(1), d = full.size(2);
  double worst = 0;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < d; ++j)
      worst = std::max(worst, std::abs(static_cast<double>(full[(i * n + t) * d + j]) - step[i * d + j]));
  return worst;
}

}  // namespace

TEST_CASE("MultiHeadAttention forward_step over a cache gives each position of the causal forward", "[kv_cache]") {
  struct Case {
    bool projections, rope;
    int64_t d_k, d_v;
  };
  for (const Case& c :
       {Case{true, false, 0, 0}, Case{true, true, 6, 10}, Case{false, true, 0, 0}, Case{false, false, 0, 0}}) {
    DYNAMIC_SECTION("projections " << c.projections << " rope " << c.rope << " d_k " << c.d_k) {
      Rng init(3), drop(4), data(5);
      MultiHeadAttention mha(step_options(c.projections, c.rope, c.d_k, c.d_v), init, drop);
      NoGradGuard no_grad;
      const Tensor x = random_tensor({3, 6, 8}, data);
      const Tensor full = mha.forward(Var(x), Var(), true).value();  // (3, 6, 8)
      const MultiHeadAttentionOptions& o = mha.options();
      KvCache cache(4, 6, o.n_heads * o.d_k, o.n_heads * o.d_v);
      const std::vector<int64_t> slots = {2, 0, 3};  // rows go to slots out of order
      for (int64_t t = 0; t < 6; ++t) {
        const Tensor step = mha.forward_step(position(x, t), cache, slots).value();
        CHECK(cache.length == t + 1);
        CHECK(row_diff(full, t, step) <= 1e-5);
      }
      CHECK_THROWS_AS(mha.forward_step(position(x, 0), cache, slots), ShapeError);  // the cache is full
      KvCache fresh(4, 6, o.n_heads * o.d_k, o.n_heads * o.d_v);
      CHECK_THROWS_AS(mha.forward_step(position(x, 0), fresh, {0, 1, 4}), ShapeError);  // slot 4 of 4
      CHECK_THROWS_AS(mha.forward_step(position(x, 0), fresh, {0, 1}), ShapeError);     // 3 rows, 2 slots
    }
  }
}

TEST_CASE("MultiHeadAttention forward_memory over precomputed keys gives the padded cross-attention forward",
          "[kv_cache]") {
  for (bool projections : {true, false}) {
    DYNAMIC_SECTION("projections " << projections) {
      Rng init(6), drop(7), data(8);
      MultiHeadAttention mha(step_options(projections, false, 0, 0), init, drop);
      NoGradGuard no_grad;
      const Tensor x = random_tensor({2, 3, 8}, data), memory = random_tensor({2, 5, 8}, data);
      Tensor pad({2, 5});
      pad[3] = pad[4] = 1;  // row 0 has 3 real keys
      pad[5] = 1;           // row 1 has its first key masked
      const Tensor full = mha.forward(Var(x), Var(memory), false, &pad).value();
      const KvCache mem = mha.memory_cache(Var(memory), &pad);
      for (int64_t t = 0; t < 3; ++t)
        CHECK(row_diff(full, t, mha.forward_memory(position(x, t), mem, {0, 1}).value()) <= 1e-5);
      // Rows read their own slot: swapped slots give the swapped answers.
      const Tensor swapped = mha.forward_memory(position(x, 0), mem, {1, 0}).value();
      const Tensor direct = mha.forward_memory(position(x, 0), mem, {0, 1}).value();
      CHECK(ConstVecMap(swapped.data(), 8) != ConstVecMap(direct.data(), 8));
    }
  }
}

TEST_CASE("cached and uncached greedy give the same held-out answers on every task, decoder and seq2seq",
          "[kv_cache]") {
  TempDir dir("kv-cache-tasks");
  {
    std::ofstream(dir / "pairs.tsv") << attnlab::testing::reverse_word_pairs();
  }
  for (const std::string& name : all_task_names()) {
    TaskConfig tc = attnlab::testing::task_config(name, 12, 4, 6);
    tc.digits = 2;
    tc.file = dir / "pairs.tsv";
    auto task = make_task(tc);
    if (task->language_model()) continue;  // text is scored by its loss, not by greedy answers
    const auto heldout = make_heldout(*task, 40, 9);
    Sources sources;
    size_t longest = 0;
    for (const Example& e : heldout.examples()) {
      sources.push_back(e.input);
      longest = std::max(longest, e.output.size());
    }
    for (const std::string arch : {"decoder", "seq2seq"}) {
      DYNAMIC_SECTION(name << ", " << arch) {
        TransformerConfig c = small_config(arch, [](TransformerConfig&) {}, 40);
        c.vocab_size = task->vocab_size();
        auto model = make_model(c, 71);
        train_briefly(*model, *task, 30);
        const auto max_new = static_cast<int64_t>(longest) + 1;  // as greedy_accuracy asks
        if (arch == "decoder")
          check_paths_agree(dynamic_cast<DecoderLM&>(*model), sources, max_new);
        else
          check_paths_agree(dynamic_cast<EncoderDecoder&>(*model), sources, max_new);
      }
    }
  }
}
