// The gradient-flow and attention instruments (framework/probe) measure what
// they claim: norms, ratios, entropies and logit statistics against direct
// computations and hand-worked cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "framework/nn/multi_head_attention.h"
#include "framework/ops/loss.h"
#include "framework/ops/reduce.h"
#include "framework/optim/optim.h"
#include "framework/probe/training_probe.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"
#include "tests/pattern_recorder.h"

using namespace attnlab;
namespace fs = std::filesystem;

namespace {

Tensor random_tensor(Shape shape, Rng& rng, double sd = 1) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Real>(rng.normal(0, sd));
  return t;
}

// Rows of a CSV file as maps column -> text (no quoted fields in the probe files).
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  auto split = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, ',')) out.push_back(f);
    return out;
  };
  std::string line;
  std::getline(in, line);
  auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    auto fields = split(line);
    REQUIRE(fields.size() == header.size());
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(row);
  }
  return rows;
}

TransformerConfig tiny_config(const std::string& arch) { return testing::model_config(arch, 10, 16, 16, 2, 2, 32); }

FormattedBatch tiny_batch(const std::string& arch) {
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs = {
      {{4, 5, 6, 7, 8}, {8, 7, 6, 5, 4}}, {{9, 4, 4, 5, 6}, {6, 5, 4, 4, 9}}, {{5, 5, 7}, {7, 5, 5}}};
  return format_batch(parse_choice<BatchFormat>("arch", arch), pairs);
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) : path(fs::temp_directory_path() / ("attnlab-probe-test-" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("uniform attention over T keys has entropy log T, max weight 1/T, no saturation", "[probe]") {
  const int64_t B = 2, h = 3, T = 7;
  Tensor w({B, h, T, T}, Real(1) / T);
  for (const HeadStats& s : attention_head_stats(w)) {
    // 1/7 in float32 is off by <= 2^-24 relative; entropy inherits that size of error.
    CHECK(s.entropy == Approx(std::log(7.0)).epsilon(1e-6));
    CHECK(s.max_weight == Approx(1.0 / 7).epsilon(1e-6));
    CHECK(s.saturated == 0);
    CHECK(s.rows == B * T);
    CHECK(std::isnan(s.logit_mean));  // no q, k given
  }
}

TEST_CASE("one-hot attention rows have entropy 0 and count as saturated, fully masked rows are skipped", "[probe]") {
  Tensor w({1, 2, 3, 4});
  // Head 0: rows one-hot. Head 1: row 0 one-hot, row 1 half/half, row 2 all zero (fully masked).
  w[0 * 4 + 1] = w[1 * 4 + 3] = w[2 * 4 + 0] = 1;
  w[12 + 0 * 4 + 2] = 1;
  w[12 + 1 * 4 + 0] = w[12 + 1 * 4 + 1] = 0.5;
  auto s = attention_head_stats(w);
  CHECK(s[0].entropy == 0);
  CHECK(s[0].saturated == 1);
  CHECK(s[0].max_weight == 1);
  CHECK(s[1].rows == 2);
  CHECK(s[1].saturated == Approx(0.5));
  CHECK(s[1].entropy == Approx(std::log(2.0) / 2).epsilon(1e-12));
}

TEST_CASE("logit mean and variance equal a direct computation of scale * q . k over unmasked keys", "[probe]") {
  Rng rng(11);
  const int64_t B = 2, h = 2, T_q = 4, T_k = 5, d_k = 3;
  const Real scale = 0.5;
  Tensor q = random_tensor({B, h, T_q, d_k}, rng), k = random_tensor({B, h, T_k, d_k}, rng);
  // Weights: positive everywhere except key 4 of batch 1, which is "masked" (0).
  Tensor w({B, h, T_q, T_k}, Real(0.25));
  for (int64_t hh = 0; hh < h; ++hh)
    for (int64_t i = 0; i < T_q; ++i) w[(((1 * h + hh) * T_q) + i) * T_k + 4] = 0;
  auto stats = attention_head_stats(w, &q, &k, scale);
  for (int64_t hh = 0; hh < h; ++hh) {
    double sum = 0, sum2 = 0;
    int64_t n = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T_q; ++i)
        for (int64_t j = 0; j < T_k; ++j) {
          if (b == 1 && j == 4) continue;
          double dot = 0;
          for (int64_t c = 0; c < d_k; ++c)
            dot += static_cast<double>(q[((b * h + hh) * T_q + i) * d_k + c]) * k[((b * h + hh) * T_k + j) * d_k + c];
          sum += scale * dot;
          sum2 += scale * dot * scale * dot;
          ++n;
        }
    const double mean = sum / n, var = sum2 / n - mean * mean;
    // The probe forms q.k in float32 (Eigen) before accumulating in double: ~1e-6 relative.
    CHECK(stats[hh].logit_mean == Approx(mean).epsilon(1e-5).margin(1e-6));
    CHECK(stats[hh].logit_var == Approx(var).epsilon(1e-5));
  }
}

TEST_CASE("a MultiHeadAttention with zero query projection attends uniformly, the probe reads q, k from the graph",
          "[probe]") {
  Rng init(3), drop(4);
  MultiHeadAttentionOptions o;
  o.d_model = 8;
  o.n_heads = 2;
  MultiHeadAttention mha(o, init, drop);
  mha.q_proj->weight.value().zero_();
  mha.q_proj->bias.value().zero_();
  const int64_t T = 6;
  Var x(random_tensor({2, T, 8}, init), true);
  PatternRecorder recorder(mha);
  Var loss = sum(mha.forward(x));
  auto inputs = recorded_attention_inputs(loss);
  REQUIRE(inputs.size() == 1);
  // (B, T, h*(2*d_k + d_v)): self-attention's packed Q/K/V product, read in place by attention_packed
  CHECK(inputs[0].q->shape() == Shape{2, T, 2 * (4 + 4 + 4)});
  CHECK(inputs[0].k == inputs[0].q);
  CHECK(inputs[0].packed_row == 24);
  CHECK(inputs[0].packed_k_base == 2 * 4);
  auto stats = attention_head_stats(recorder.weights, inputs[0], mha.scale());
  for (const HeadStats& s : stats) {
    CHECK(s.entropy == Approx(std::log(static_cast<double>(T))).epsilon(1e-6));  // float32 softmax of equal logits
    CHECK(s.logit_mean == 0);  // q = 0 exactly, so every logit is exactly 0
    CHECK(s.logit_var == 0);
  }
}

TEST_CASE("the logit statistics read from the packed Q/K/V product equal those of the separate q and k projections",
          "[probe]") {
  Rng init(8), drop(9);
  MultiHeadAttentionOptions o;
  o.d_model = 12;
  o.n_heads = 3;
  o.d_k = 2;  // d_k != d_v: k's heads start at column h*d_k = 6 of a 3*(2+2+4) = 24-wide row
  o.d_v = 4;
  MultiHeadAttention mha(o, init, drop);
  Var x(random_tensor({2, 5, 12}, init), true);
  PatternRecorder recorder(mha);
  Var loss = sum(mha.forward(x));
  auto inputs = recorded_attention_inputs(loss);
  REQUIRE(inputs.size() == 1);
  REQUIRE(inputs[0].packed_row == 24);
  CHECK(inputs[0].packed_k_base == 6);
  const Tensor q = mha.q_proj->forward(x).value(), k = mha.k_proj->forward(x).value();  // (B, T, h*d_k) each
  auto packed = attention_head_stats(recorder.weights, inputs[0], mha.scale());
  auto separate = attention_head_stats(recorder.weights, &q, &k, mha.scale());
  REQUIRE(packed.size() == 3);
  for (size_t hh = 0; hh < 3; ++hh) {
    CHECK(separate[hh].logit_var > 0);  // real logits, not a degenerate case
    CHECK(packed[hh].logit_mean == Approx(separate[hh].logit_mean).epsilon(1e-6).margin(1e-7));
    CHECK(packed[hh].logit_var == Approx(separate[hh].logit_var).epsilon(1e-6));
  }
}

TEST_CASE("recorded_attention_inputs finds every attention layer of a seq2seq model, in forward order", "[probe]") {
  auto model = make_model(tiny_config("seq2seq"), 5);
  auto layers = find_attention_modules(*model);
  REQUIRE(layers.size() == 6);  // 2 encoder self, 2 x (decoder self, cross)
  CHECK(layers[0].first == "encoder.blocks.0.attn");
  CHECK(layers[3].first == "decoder.blocks.0.cross_attn");
  FormattedBatch batch = tiny_batch("seq2seq");
  Var loss = cross_entropy(model->forward(batch.input), batch.targets, {kIgnoreTarget, 0});
  auto inputs = recorded_attention_inputs(loss);
  REQUIRE(inputs.size() == 6);
  const int64_t T_src = batch.input.src.shape[1], T_tgt = batch.input.tgt_in.shape[1];
  CHECK(inputs[0].k->size(-2) == T_src);  // encoder self-attention
  CHECK(inputs[2].k->size(-2) == T_tgt);  // decoder self-attention
  CHECK(inputs[3].q->size(-2) == T_tgt);  // cross-attention: target queries, source keys
  CHECK(inputs[3].k->size(-2) == T_src);
}

TEST_CASE("the SGD update-to-weight ratio matches a hand computation", "[probe]") {
  Var w(Tensor::from({2}, {3, 4}), true);  // ||w|| = 5
  w.grad() = Tensor::from({2}, {0.6f, 0.8f});   // ||g|| = 1
  OptimizerConfig c;
  c.kind = OptimizerKind::sgd;
  c.lr = 0.5;
  c.weight_decay = 0;
  auto opt = make_optimizer(c, {{"w", w}});
  UpdateProbe probe({{"w", w}});
  probe.before_step();
  opt->step();
  auto stats = probe.after_step();
  REQUIRE(stats.size() == 1);
  // w − 0.5 g = (2.7, 3.6): update norm 0.5, ratio 0.5 / 5 = 0.1 (float32 rounding of 2.7, 3.6: ~1e-7).
  CHECK(stats[0].grad_norm == Approx(1.0).epsilon(1e-7));
  CHECK(stats[0].weight_norm == 5.0);
  CHECK(stats[0].update_norm == Approx(0.5).epsilon(1e-6));
  CHECK(stats[0].update_ratio == Approx(0.1).epsilon(1e-6));
}

TEST_CASE("TrainingProbe logs gradient norms equal to the norms computed directly, and every stream point",
          "[probe]") {
  TempDir dir("training");
  for (const std::string arch : {"encoder", "decoder"}) {
    auto model = make_model(tiny_config(arch), 7);
    auto opt = make_optimizer(OptimizerConfig{}, model->named_parameters());
    TrainingProbe probe(*model, model->hooks(), dir.path.string(),
                        {{"embed", "emb"}, {"blocks.0.resid_post", "block0"}, {"blocks.1.resid_post", "block1"}});
    FormattedBatch batch = tiny_batch(arch);
    model->zero_grad();
    probe.before_forward();
    Var loss = cross_entropy(model->forward(batch.input), batch.targets, {kIgnoreTarget, 0});
    probe.after_forward(loss);
    backward(loss);
    probe.after_backward();
    std::map<std::string, double> direct;
    for (const auto& [name, p] : model->named_parameters()) {
      double s = 0;
      for (int64_t i = 0; i < p.grad().numel(); ++i) s += static_cast<double>(p.grad()[i]) * p.grad()[i];
      direct[name] = std::sqrt(s);
    }
    opt->step();
    probe.after_step(1);

    auto params = read_csv((dir.path / "probe_params.csv").string());
    REQUIRE(params.size() == direct.size());
    for (const auto& row : params) {
      INFO(arch << " " << row.at("param"));
      // Both sum the same float32 squares in double, in different orders: ~1e-15 relative.
      CHECK(std::stod(row.at("grad_norm")) == Approx(direct.at(row.at("param"))).epsilon(1e-12));
      // AdamW moves every parameter; a zero-initialised bias has no ratio (0 by definition).
      CHECK(std::stod(row.at("update_norm")) > 0);
      if (std::stod(row.at("weight_norm")) > 0) CHECK(std::stod(row.at("update_ratio")) > 0);
    }
    auto stream = read_csv((dir.path / "probe_stream.csv").string());
    REQUIRE(stream.size() == 3);  // embeddings + 2 blocks
    CHECK(stream[0].at("point") == "emb");
    CHECK(stream[1].at("point") == "block0");
    CHECK(stream[2].at("point") == "block1");
    for (const auto& row : stream) {
      CHECK(std::stod(row.at("act_rms")) > 0);
      CHECK(std::stod(row.at("grad_rms")) > 0);
    }
    const int64_t T = arch == "encoder" ? batch.input.src.shape[1] : batch.input.tgt_in.shape[1];
    auto heads = read_csv((dir.path / "probe_heads.csv").string());
    REQUIRE(heads.size() == 4);  // 2 layers x 2 heads
    for (const auto& row : heads) {
      CHECK(std::isfinite(std::stod(row.at("logit_var"))));
      const double entropy = std::stod(row.at("entropy"));
      CHECK(entropy > 0);
      CHECK(entropy <= std::log(static_cast<double>(T)) + 1e-6);  // never above uniform over all T keys
    }
    // The probe leaves nothing hooked after its step.
    CHECK(model->hooks().empty());
  }
}
