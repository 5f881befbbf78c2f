// The three models in float32: sizes and names, causality, padding
// invariance, batch layouts, greedy decoding, config validation. (Gradients
// are checked in float64 in tests/gradcheck/test_models.cpp, values against
// PyTorch in tests/test_parity.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <set>

#include "framework/nn/multi_head_attention.h"
#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/config.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"

using namespace attnlab;

namespace {

TransformerConfig small(const std::string& arch) { return testing::model_config(arch, 12, 16, 16, 4, 2, 32); }

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, var] : m.named_parameters()) names.push_back(name);
  return names;
}

bool has(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

IntTensor ids(Shape shape, std::vector<int32_t> values) {
  IntTensor t(std::move(shape));
  t.data = std::move(values);
  return t;
}

std::vector<Real> pad_values(const Tensor& t) { return std::vector<Real>(t.data(), t.data() + t.numel()); }

// The logits row (V values) of batch row b at position t.
std::vector<Real> logit_row(const Var& logits, int64_t b, int64_t t) {
  const int64_t T = logits.size(1), V = logits.size(2);
  const Real* p = logits.value().data() + (b * T + t) * V;
  return std::vector<Real>(p, p + V);
}

std::string validation_error(const TransformerConfig& c) {
  try {
    c.validate();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---- sizes, names, init ----------------------------------------------------------

TEST_CASE("the benchmark's S encoder has exactly 102,160 parameters", "[models]") {
  TransformerConfig c;  // V16 d64 h4 L2 dff256, encoder, pre-LN, sinusoidal, no tie
  c.arch = Arch::encoder;
  c.vocab_size = 16;
  c.d_model = 64;
  c.n_heads = 4;
  c.n_layers = 2;
  c.d_ff = 256;
  c.positional = Positional::sinusoidal;
  c.norm = Norm::pre;
  c.tie_embeddings = false;
  auto model = make_model(c, 1);
  REQUIRE(model->parameter_count() == 102160);
}

TEST_CASE("parameter names follow the shared plan for each architecture", "[models]") {
  auto enc = names_of(*make_model(small("encoder"), 1));
  CHECK(enc.front() == "tok_emb.weight");
  CHECK(has(enc, "blocks.1.attn.q_proj.weight"));
  CHECK(has(enc, "blocks.0.ln2.bias"));
  CHECK(has(enc, "blocks.0.ff.fc2.weight"));
  CHECK(has(enc, "ln_f.weight"));
  CHECK(has(enc, "head.weight"));
  CHECK(enc.back() == "head.bias");
  CHECK_FALSE(has(enc, "pos_emb.weight"));  // sinusoidal is a constant

  TransformerConfig dc = small("decoder");
  dc.positional = Positional::learned;
  dc.norm = Norm::post;
  auto dec = names_of(*make_model(dc, 1));
  CHECK(has(dec, "pos_emb.weight"));
  CHECK(has(dec, "blocks.0.attn.out_proj.bias"));
  CHECK_FALSE(has(dec, "ln_f.weight"));  // post-LN has no final norm

  TransformerConfig sc = small("seq2seq");
  sc.tie_embeddings = true;
  auto s2s = names_of(*make_model(sc, 1));
  for (const char* n : {"encoder.blocks.1.attn.v_proj.weight", "encoder.ln_f.bias", "decoder.blocks.0.self_attn.q_proj.weight",
                        "decoder.blocks.1.cross_attn.k_proj.bias", "decoder.blocks.0.ln3.weight", "decoder.ln_f.weight",
                        "head.bias"}) {
    INFO(n);
    CHECK(has(s2s, n));
  }
  CHECK_FALSE(has(s2s, "head.weight"));  // tied to tok_emb.weight
}

TEST_CASE("make_model initialises deterministically from its seed", "[models]") {
  auto a = make_model(small("seq2seq"), 5), b = make_model(small("seq2seq"), 5), c = make_model(small("seq2seq"), 6);
  auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  bool all_same = true, any_differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    all_same = all_same && pa[i].value().flat() == pb[i].value().flat();
    any_differs = any_differs || pa[i].value().flat() != pc[i].value().flat();
  }
  CHECK(all_same);
  CHECK(any_differs);
}

TEST_CASE("every attention layer has a pattern hook point, in forward order", "[models]") {
  auto patterns = [](const SequenceModel& m) {
    std::vector<std::string> out;
    for (const std::string& name : m.hooks().names())
      if (name.size() > 8 && name.compare(name.size() - 8, 8, ".pattern") == 0) out.push_back(name);
    return out;
  };
  CHECK(patterns(*make_model(small("encoder"), 1)).size() == 2);
  CHECK(patterns(*make_model(small("decoder"), 1)).size() == 2);
  auto layers = patterns(*make_model(small("seq2seq"), 1));
  REQUIRE(layers.size() == 6);  // 2 encoder self, then (self, cross) x 2
  CHECK(layers[3] == "decoder.blocks.0.cross_attn.pattern");
}

// ---- causality ----------------------------------------------------------------------

namespace {

// Sets in.tgt_in to `base`, then changes each target token t+1 in turn (to 10,
// or 11 where it is 10): the logits at positions <= t must stay bitwise the
// same, while position t+1 itself must see its new token. Returns the logits
// of `base`.
Var check_target_causality(SequenceModel& model, ModelInput in, const std::vector<int32_t>& base) {
  const int64_t T = static_cast<int64_t>(base.size());
  in.tgt_in = ids({1, T}, base);
  Var ref = model.forward(in);
  for (int64_t t = 0; t + 1 < T; ++t) {
    std::vector<int32_t> changed = base;
    changed[static_cast<size_t>(t + 1)] = changed[static_cast<size_t>(t + 1)] == 10 ? 11 : 10;
    in.tgt_in = ids({1, T}, changed);
    Var out = model.forward(in);
    for (int64_t p = 0; p <= t; ++p) {
      INFO("changed position " << t + 1 << ", checked position " << p);
      CHECK(logit_row(out, 0, p) == logit_row(ref, 0, p));
    }
    CHECK(logit_row(out, 0, t + 1) != logit_row(ref, 0, t + 1));
  }
  return ref;
}

}  // namespace

TEST_CASE("decoder LM: changing the token at t+1 leaves every logit at positions <= t bitwise unchanged",
          "[models][causality]") {
  TransformerConfig c = small("decoder");
  c.positional = Positional::rope;
  auto model = make_model(c, 3);
  check_target_causality(*model, ModelInput{}, {1, 5, 7, 4, 9, 3, 6, 8});
}

TEST_CASE("encoder-decoder: changing target token t+1 leaves decoder logits at positions <= t bitwise unchanged",
          "[models][causality]") {
  auto model = make_model(small("seq2seq"), 4);
  const std::vector<int32_t> base = {1, 6, 4, 8, 5, 7};
  ModelInput in;
  in.src = ids({1, 4}, {5, 6, 7, 8});
  Var ref = check_target_causality(*model, in, base);
  // The source, in contrast, is seen by every target position.
  in.tgt_in = ids({1, static_cast<int64_t>(base.size())}, base);
  in.src = ids({1, 4}, {5, 6, 7, 9});
  Var other_src = model->forward(in);
  CHECK(logit_row(other_src, 0, 0) != logit_row(ref, 0, 0));
}

// ---- padding ----------------------------------------------------------------------------

namespace {

// Runs each pair alone and all of them in one padded batch; the logits at
// real positions must agree. Tolerance 1e-5 absolute (logits are O(1)-O(10)):
// padding changes the shapes, so matrix kernels may block and sum in another
// order, a float32 rounding difference of ~1e-6 at most; a leak through the
// padding (a pad key attended to) changes logits by ~0.1.
void check_padding_invariance(const TransformerConfig& c, const TokenPairs& pairs) {
  auto model = make_model(c, 9);
  const FormattedBatch batch = format_batch(batch_format(c, false), pairs);
  Var together = model->forward(batch.input);
  const bool decoder_side = c.arch != Arch::encoder;
  const Tensor& pad = decoder_side ? batch.input.tgt_pad : batch.input.src_pad;
  const int64_t T = together.size(1);
  double worst = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const FormattedBatch one = format_batch(batch_format(c, false), {pairs[i]});
    Var alone = model->forward(one.input);
    for (int64_t t = 0; t < alone.size(1); ++t) {
      REQUIRE(pad[static_cast<int64_t>(i) * T + t] == 0);  // a real position in the batch too
      auto a = logit_row(alone, 0, t), b = logit_row(together, static_cast<int64_t>(i), t);
      for (size_t v = 0; v < a.size(); ++v) worst = std::max(worst, static_cast<double>(std::abs(a[v] - b[v])));
    }
  }
  CHECK(worst <= 1e-5);
}

}  // namespace

TEST_CASE("padding a batch changes no encoder logit at real positions beyond 1e-5", "[models][padding]") {
  TransformerConfig c = small("encoder");
  c.positional = Positional::learned;
  check_padding_invariance(c, {{{4, 5, 6, 7, 8, 9}, {}}, {{5, 6}, {}}, {{7, 8, 9, 10}, {}}});
}

TEST_CASE("padding a batch changes no decoder-LM logit at real positions beyond 1e-5", "[models][padding]") {
  TransformerConfig c = small("decoder");
  c.positional = Positional::rope;
  check_padding_invariance(c, {{{4, 5, 6}, {7, 8}}, {{5}, {6}}, {{7, 8, 9, 10}, {4, 5, 6}}});
}

TEST_CASE("padding a batch changes no encoder-decoder logit at real positions beyond 1e-5", "[models][padding]") {
  TransformerConfig c = small("seq2seq");
  c.norm = Norm::post;
  check_padding_invariance(c, {{{4, 5, 6, 7, 8}, {7, 8}}, {{5}, {6, 7, 8, 9}}, {{7, 8, 9}, {4}}});
}

// ---- format_batch -------------------------------------------------------------------------

TEST_CASE("format_batch lays out the encoder batch: aligned targets, padding ignored", "[models][batch]") {
  const FormattedBatch b = format_batch(BatchFormat::encoder, {{{4, 5, 6}, {6, 5, 4}}, {{7}, {7}}, {{8, 9}, {9}}});
  CHECK(b.input.src.shape == Shape{3, 3});
  CHECK(b.input.src.data == std::vector<int32_t>{4, 5, 6, 7, 0, 0, 8, 9, 0});
  CHECK(pad_values(b.input.src_pad) == std::vector<Real>{0, 0, 0, 0, 1, 1, 0, 0, 1});
  CHECK(b.targets.data == std::vector<int32_t>{6, 5, 4, 7, -100, -100, 9, -100, -100});
  CHECK(b.input.tgt_in.numel() == 0);
  CHECK(b.input.tgt_pad.numel() == 0);
}

TEST_CASE("format_batch lays out the decoder batch: [bos] src [sep] tgt, loss on tgt and eos only",
          "[models][batch]") {
  const FormattedBatch b = format_batch(BatchFormat::decoder, {{{4, 5}, {6}}, {{7}, {8, 9}}});
  // tokens: [1 4 5 3 6 2] and [1 7 3 8 9 2]; inputs drop the last, targets the first.
  CHECK(b.input.tgt_in.shape == Shape{2, 5});
  CHECK(b.input.tgt_in.data == std::vector<int32_t>{1, 4, 5, 3, 6, 1, 7, 3, 8, 9});
  CHECK(pad_values(b.input.tgt_pad) == std::vector<Real>(10, 0));
  CHECK(b.targets.data == std::vector<int32_t>{-100, -100, -100, 6, 2, -100, -100, 8, 9, 2});
  CHECK(b.input.src.numel() == 0);

  const FormattedBatch p = format_batch(BatchFormat::decoder, {{{4, 5, 6}, {7}}, {{8}, {9}}});
  // [1 4 5 6 3 7 2] -> 6 inputs; [1 8 3 9 2] -> 4 inputs + 2 pads.
  CHECK(p.input.tgt_in.shape == Shape{2, 6});
  CHECK(p.input.tgt_in.data == std::vector<int32_t>{1, 4, 5, 6, 3, 7, 1, 8, 3, 9, 0, 0});
  CHECK(pad_values(p.input.tgt_pad) == std::vector<Real>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1});
  CHECK(p.targets.data == std::vector<int32_t>{-100, -100, -100, -100, 7, 2, -100, -100, 9, 2, -100, -100});
}

TEST_CASE("format_batch lays out the seq2seq batch: src, [bos] tgt, tgt [eos]", "[models][batch]") {
  const FormattedBatch b = format_batch(BatchFormat::seq2seq, {{{4, 5, 6}, {7}}, {{8}, {9, 10}}});
  CHECK(b.input.src.shape == Shape{2, 3});
  CHECK(b.input.src.data == std::vector<int32_t>{4, 5, 6, 8, 0, 0});
  CHECK(pad_values(b.input.src_pad) == std::vector<Real>{0, 0, 0, 0, 1, 1});
  CHECK(b.input.tgt_in.shape == Shape{2, 3});
  CHECK(b.input.tgt_in.data == std::vector<int32_t>{1, 7, 0, 1, 9, 10});
  CHECK(pad_values(b.input.tgt_pad) == std::vector<Real>{0, 0, 1, 0, 0, 0});
  CHECK(b.targets.data == std::vector<int32_t>{7, 2, -100, 9, 10, 2});
}

TEST_CASE("format_batch rejects bad batches with a message naming the problem", "[models][batch]") {
  CHECK_THROWS_WITH(format_batch(BatchFormat::encoder, {{{4, 5}, {4, 5, 6}}}), Catch::Contains("length 3") &&
                                                                        Catch::Contains("length 2"));
  CHECK_THROWS_AS(format_batch(BatchFormat::encoder, {}), ValueError);
  CHECK_FALSE(choice_named<BatchFormat>("tagger"));  // a layout is one of five, named at the boundary
  CHECK_THROWS_WITH(format_batch(BatchFormat::seq2seq, {{{4, -1}, {4}}}), Catch::Contains("-1"));
}

// ---- forward errors ----------------------------------------------------------------------

TEST_CASE("a sequence longer than max_len is rejected naming both lengths", "[models]") {
  TransformerConfig c = small("encoder");
  c.max_len = 4;
  auto model = make_model(c, 1);
  ModelInput in;
  in.src = ids({1, 5}, {4, 4, 4, 4, 4});
  CHECK_THROWS_WITH(model->forward(in), Catch::Contains("length 5") && Catch::Contains("max_len = 4"));
  CHECK_THROWS_WITH(model->greedy({{4, 5, 6, 7, 8}}, 0), Catch::Contains("length 5") &&
                                                            Catch::Contains("max_len = 4"));
  TransformerConfig d = small("decoder");
  d.max_len = 4;
  // [bos] 4 5 6 [sep] is 5 positions.
  CHECK_THROWS_WITH(make_model(d, 1)->greedy({{4, 5, 6}}, 3), Catch::Contains("length 5"));
}

TEST_CASE("a missing decoder input or a mismatched padding mask is a ShapeError", "[models]") {
  auto s2s = make_model(small("seq2seq"), 1);
  ModelInput in;
  in.src = ids({1, 3}, {4, 5, 6});
  CHECK_THROWS_AS(s2s->forward(in), ShapeError);
  in.tgt_in = ids({1, 2}, {1, 4});
  in.src_pad = Tensor({1, 2});
  CHECK_THROWS_AS(s2s->forward(in), ShapeError);
}

// ---- greedy -------------------------------------------------------------------------------

TEST_CASE("greedy on an untrained encoder returns one in-vocabulary token per input position", "[models][greedy]") {
  auto model = make_model(small("encoder"), 2);
  const std::vector<std::vector<int32_t>> src = {{4, 5, 6, 7}, {8}, {}};
  auto out = model->greedy(src, 10);
  REQUIRE(out.size() == 3);
  for (size_t i = 0; i < src.size(); ++i) {
    CHECK(out[i].size() == src[i].size());
    for (int32_t t : out[i]) CHECK((t >= 0 && t < 12));
  }
  // It is the argmax of the forward logits.
  ModelInput in;
  in.src = ids({1, 4}, src[0]);
  Var logits = model->forward(in);
  for (int64_t t = 0; t < 4; ++t) {
    auto row = logit_row(logits, 0, t);
    CHECK(out[0][static_cast<size_t>(t)] == std::max_element(row.begin(), row.end()) - row.begin());
  }
}

TEST_CASE("greedy on an untrained decoder LM stops at max_new_tokens or eos and restores train mode",
          "[models][greedy]") {
  auto model = make_model(small("decoder"), 2);
  REQUIRE(model->training());
  const std::vector<std::vector<int32_t>> src = {{4, 5, 6}, {7}, {}};
  auto out = model->greedy(src, 5);
  CHECK(model->training());
  REQUIRE(out.size() == 3);
  for (const auto& o : out) {
    CHECK(o.size() <= 5);
    for (int32_t t : o) CHECK((t >= 0 && t < 12 && t != SpecialTokens::eos));
  }
  // The first generated token is the argmax after [bos] src [sep].
  ModelInput in;
  in.tgt_in = ids({1, 5}, {1, 4, 5, 6, 3});
  Var logits = model->forward(in);
  auto row = logit_row(logits, 0, 4);
  const int32_t first = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
  if (first == SpecialTokens::eos) CHECK(out[0].empty());
  else CHECK(out[0].at(0) == first);
  // Generation never reads past max_len: [bos] + 3 + [sep] = 5 inputs, at most 12 more.
  CHECK(model->greedy(src, 100)[0].size() <= 12);
}

TEST_CASE("greedy on an untrained encoder-decoder is well-formed and matches teacher-forced argmax",
          "[models][greedy]") {
  auto model = make_model(small("seq2seq"), 2);
  model->eval();
  const std::vector<std::vector<int32_t>> src = {{4, 5, 6}, {7, 8}};
  auto out = model->greedy(src, 6);
  CHECK_FALSE(model->training());  // eval mode restored as eval
  REQUIRE(out.size() == 2);
  for (const auto& o : out) {
    CHECK(o.size() <= 6);
    for (int32_t t : o) CHECK((t >= 0 && t < 12 && t != SpecialTokens::eos));
  }
  // Feeding [bos] + generated back in, each generated token is the argmax at its position.
  const auto& gen = out[0];
  std::vector<int32_t> tgt{SpecialTokens::bos};
  tgt.insert(tgt.end(), gen.begin(), gen.end());
  ModelInput in;
  in.src = ids({1, 3}, src[0]);
  in.tgt_in = ids({1, static_cast<int64_t>(tgt.size())}, tgt);
  Var logits = model->forward(in);
  for (size_t t = 0; t < gen.size(); ++t) {
    auto row = logit_row(logits, 0, static_cast<int64_t>(t));
    CHECK(gen[t] == std::max_element(row.begin(), row.end()) - row.begin());
  }
}

TEST_CASE("greedy restores gradient recording and leaves no gradients behind", "[models][greedy]") {
  auto model = make_model(small("seq2seq"), 2);
  model->greedy({{4, 5}}, 3);
  CHECK(grad_enabled());
  for (const Var& p : model->parameters()) CHECK_FALSE(p.has_grad());
  ModelInput in;
  in.src = ids({1, 2}, {4, 5});
  in.tgt_in = ids({1, 1}, {1});
  CHECK(model->forward(in).requires_grad());  // recording is back on
}

// ---- dropout -----------------------------------------------------------------------------

TEST_CASE("dropout is active in training mode only", "[models]") {
  TransformerConfig c = small("encoder");
  c.dropout = 0.3;
  auto model = make_model(c, 1);
  ModelInput in;
  in.src = ids({1, 4}, {4, 5, 6, 7});
  Var a = model->forward(in), b = model->forward(in);
  CHECK(logit_row(a, 0, 0) != logit_row(b, 0, 0));  // fresh masks
  model->eval();
  Var e1 = model->forward(in), e2 = model->forward(in);
  CHECK(logit_row(e1, 0, 0) == logit_row(e2, 0, 0));
}

// ---- config --------------------------------------------------------------------------------

TEST_CASE("config validation names the bad field and value", "[models][config]") {
  TransformerConfig c;
  c.d_model = 64;
  c.n_heads = 3;
  CHECK(validation_error(c) == "n_heads 3 does not divide d_model 64; choose a divisor, or set d_k and d_v");
  c.d_k = 20;
  c.d_v = 22;
  CHECK(validation_error(c).empty());  // explicit head widths lift the constraint

  // One bad field at a time; the message names the field and the value.
  struct BadField {
    std::function<void(TransformerConfig&)> set;
    std::vector<std::string> named;
  };
  const std::vector<BadField> cases = {
      {[](TransformerConfig& t) { t.attn_scale = "cubic"; }, {"attn_scale", "'cubic'"}},
      {[](TransformerConfig& t) { t.dropout = 1.0; }, {"dropout", "1"}},
      {[](TransformerConfig& t) { t.vocab_size = 0; }, {"vocab_size", "0"}},
      {[](TransformerConfig& t) { t.max_len = 0; }, {"max_len"}},
      {[](TransformerConfig& t) {
         t.positional = Positional::rope;
         t.d_k = 5;
         t.d_v = 16;
       }, {"rope", "d_k = 5"}},
  };
  for (const BadField& bad : cases) {
    TransformerConfig t;
    bad.set(t);
    const std::string message = validation_error(t);
    INFO(message);
    for (const std::string& name : bad.named) CHECK_THAT(message, Catch::Contains(name));
  }
  CHECK_THROWS_WITH(TransformerConfig::from_json({{"activation", "tanh"}}),
                    "activation must be one of 'gelu', 'relu', got 'tanh'");
}

TEST_CASE("config JSON round-trips, keeps defaults for missing keys and rejects unknown ones", "[models][config]") {
  TransformerConfig c = small("seq2seq");
  c.positional = Positional::rope;
  c.attn_scale = "0.25";
  c.tie_embeddings = true;
  c.dropout = 0.1;
  const TransformerConfig back = TransformerConfig::from_json(c.to_json());
  CHECK(back.to_json() == c.to_json());

  const TransformerConfig partial = TransformerConfig::from_json({{"arch", "decoder"}, {"d_model", 32}});
  CHECK(partial.arch == Arch::decoder);
  CHECK(partial.d_model == 32);
  CHECK(partial.n_layers == TransformerConfig().n_layers);

  // A numeric attention scale may be written as a JSON number.
  CHECK(TransformerConfig::from_json({{"attn_scale", 0.125}}).attn_scale == "0.125");

  CHECK_THROWS_WITH(TransformerConfig::from_json({{"d_modle", 32}}), Catch::Contains("d_modle"));
  CHECK_THROWS_WITH(TransformerConfig::from_json({{"d_model", "wide"}}), Catch::Contains("d_model"));
  CHECK_THROWS_WITH(TransformerConfig::from_json({{"n_heads", 5}}), Catch::Contains("n_heads 5"));
  // A choice's text is parsed where it is read: the message names the field, the value and the choices.
  CHECK_THROWS_WITH(TransformerConfig::from_json({{"positional", "absolute"}}),
                    "positional must be one of 'learned', 'none', 'rope', 'sinusoidal', got 'absolute'");
  CHECK_THROWS_WITH(TransformerConfig::from_json({{"arch", "gpt"}}),
                    "arch must be one of 'decoder', 'encoder', 'seq2seq', got 'gpt'");
  CHECK_THROWS_WITH(TransformerConfig::from_json({{"norm", "middle"}}), "norm must be one of 'none', 'post', 'pre', got 'middle'");
  CHECK_THROWS_WITH(TransformerConfig::from_json({{"norm", 1}}), "config field 'norm' must be a string, got 1");
}
