// Whole-model parity with PyTorch: the fixtures in tests/data/model_*.json
// were written by scripts/pytorch/torch_reference.py (its own PyTorch modules with
// attnlab's parameter names). Each holds a config, every weight, one padded
// batch, and the float64 logits, loss and parameter gradients. We load the
// weights into the attnlab model built from the config and compare. No
// PyTorch is needed here.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/sequence_model.h"

using namespace attnlab;
using nlohmann::json;

namespace {

json load_fixture(const std::string& name) {
  const std::string path = std::string(ATTNLAB_TEST_DATA) + "/" + name + ".json";
  std::ifstream in(path);
  INFO("fixture " << path << " (regenerate with: python3 scripts/pytorch/torch_reference.py --out tests/data)");
  REQUIRE(in.good());
  return json::parse(in);
}

Shape shape_of(const json& j) { return j.at("shape").get<Shape>(); }

Tensor real_tensor(const json& j) {
  const auto values = j.at("values").get<std::vector<double>>();
  return Tensor::from(shape_of(j), std::vector<Real>(values.begin(), values.end()));
}

IntTensor int_tensor(const json& j) {
  IntTensor t(shape_of(j));
  t.data = j.at("values").get<std::vector<int32_t>>();
  REQUIRE(t.numel() == shape_numel(t.shape));
  return t;
}

Tensor pad_tensor(const json& j) {
  IntTensor t = int_tensor(j);
  return Tensor::from(t.shape, std::vector<Real>(t.data.begin(), t.data.end()));
}

// Tolerance, float32 against a float64 reference: |got − ref| <= rtol·|ref| +
// atol with rtol = 1e-5 (float32 keeps ~7 digits; a forward and backward
// through two or four blocks lose about one to two of them to rounding) and
// an absolute floor atol = 1e-6 · max(1, max |ref| of the tensor), for
// entries that cancel to near zero (sums of terms of the tensor's own size
// whose float32 rounding is ~1e-7 of that size). A missing term, a wrong
// scale or a transposed weight errs by far more than this.
constexpr double kRtol = 1e-5;
constexpr double kAtolFactor = 1e-6;

void require_close(const Tensor& got, const json& ref_json, const std::string& what) {
  const Tensor ref = real_tensor(ref_json);
  INFO(what);
  REQUIRE(got.shape() == ref.shape());
  double max_ref = 1;
  for (int64_t i = 0; i < ref.numel(); ++i) max_ref = std::max(max_ref, std::abs(static_cast<double>(ref[i])));
  const double atol = kAtolFactor * max_ref;
  double worst = 0;  // error in units of the allowed error
  int64_t worst_i = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
    const double ratio = err / (kRtol * std::abs(static_cast<double>(ref[i])) + atol);
    if (ratio > worst) {
      worst = ratio;
      worst_i = i;
    }
  }
  INFO("worst element " << worst_i << ": attnlab " << got[worst_i] << ", torch " << ref[worst_i] << " ("
                        << worst << " x the tolerance)");
  CHECK(worst <= 1.0);
}

// Loads the fixture's weights into `model`: names and shapes must match one-to-one.
void load_weights(SequenceModel& model, const json& weights) {
  std::set<std::string> fixture_names, model_names;
  for (auto it = weights.begin(); it != weights.end(); ++it) fixture_names.insert(it.key());
  for (auto& [param_name, var] : model.named_parameters()) {
    model_names.insert(param_name);
    INFO("parameter " << param_name);
    REQUIRE(weights.contains(param_name));
    Tensor w = real_tensor(weights.at(param_name));
    REQUIRE(w.shape() == var.shape());
    var.value() = std::move(w);
  }
  REQUIRE(fixture_names == model_names);
}

// One token stream of the fixture (src or tgt_in, with its padding mask) into
// `ids`/`pad`, checked against what format_batch laid out for it.
void read_stream(const json& inputs, const std::string& key, const IntTensor& formatted_ids,
                 const Tensor& formatted_pad, IntTensor& ids, Tensor& pad) {
  if (!inputs.contains(key)) return;
  INFO("input " << key);
  ids = int_tensor(inputs.at(key));
  pad = pad_tensor(inputs.at(key == "src" ? "src_pad" : "tgt_pad"));
  CHECK(formatted_ids.data == ids.data);
  CHECK(formatted_ids.shape == ids.shape);
  CHECK(formatted_pad.shape() == pad.shape());
  for (int64_t i = 0; i < pad.numel(); ++i) CHECK(formatted_pad[i] == pad[i]);
}

void run_parity(const std::string& name) {
  const json fx = load_fixture(name);
  const TransformerConfig config = TransformerConfig::from_json(fx.at("config"));
  auto model = make_model(config, /*seed=*/0);
  load_weights(*model, fx.at("weights"));

  // format_batch lays out the fixture's pairs exactly as the reference did.
  TokenPairs pairs;
  for (const auto& p : fx.at("pairs"))
    pairs.emplace_back(p.at(0).get<std::vector<int32_t>>(), p.at(1).get<std::vector<int32_t>>());
  const FormattedBatch batch = format_batch(batch_format(config, false), pairs);
  const json& inputs = fx.at("inputs");
  ModelInput input;
  read_stream(inputs, "src", batch.input.src, batch.input.src_pad, input.src, input.src_pad);
  read_stream(inputs, "tgt_in", batch.input.tgt_in, batch.input.tgt_pad, input.tgt_in, input.tgt_pad);
  const IntTensor targets = int_tensor(inputs.at("targets"));
  CHECK(batch.targets.data == targets.data);
  CHECK(batch.targets.shape == targets.shape);

  model->zero_grad();
  Var logits = model->forward(input);
  require_close(logits.value(), fx.at("logits"), "logits");

  CrossEntropyOptions ce;
  ce.label_smoothing = static_cast<Real>(fx.at("label_smoothing").get<double>());
  Var loss = cross_entropy(logits, targets, ce);
  const double ref_loss = fx.at("loss").get<double>();
  // Same tolerance as the tensors: the loss is O(1).
  CHECK(std::abs(static_cast<double>(loss.item()) - ref_loss) <= kRtol * std::abs(ref_loss) + kAtolFactor);

  backward(loss);
  const json& grads = fx.at("grads");
  for (auto& [param_name, var] : model->named_parameters()) {
    REQUIRE(var.has_grad());
    require_close(var.grad(), grads.at(param_name), "gradient of " + param_name);
  }
}

}  // namespace

TEST_CASE("encoder tagger (pre-LN, sinusoidal, padded) matches PyTorch: logits, loss, every gradient",
          "[parity][models]") {
  run_parity("model_encoder_pre_sinusoidal");
}

TEST_CASE("decoder-only LM (pre-LN, rope, causal + padding) matches PyTorch: logits, loss, every gradient",
          "[parity][models]") {
  run_parity("model_decoder_pre_rope");
}

TEST_CASE("encoder-decoder (post-LN, learned positions, tied embeddings, label smoothing) matches PyTorch",
          "[parity][models]") {
  run_parity("model_seq2seq_post_learned_tied");
}

TEST_CASE("encoder-decoder (pre-LN, attention scale none, d_k != d_v, no positions) matches PyTorch",
          "[parity][models]") {
  run_parity("model_seq2seq_pre_scale_none_dk_dv");
}

TEST_CASE("decoder-only LM without norms, attention-only, without biases matches PyTorch: logits, loss, gradients",
          "[parity][models]") {
  run_parity("model_decoder_none_attention_only_no_bias");
}

TEST_CASE("encoder-decoder without norms or biases (tied head, gelu) matches PyTorch: logits, loss, gradients",
          "[parity][models]") {
  run_parity("model_seq2seq_none_no_bias_tied");
}

TEST_CASE("encoder tagger, post-LN and attention-only, matches PyTorch: logits, loss, every gradient",
          "[parity][models]") {
  run_parity("model_encoder_post_attention_only");
}
