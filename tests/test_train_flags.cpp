// Every flag of `attnlab train` reaches the math, at the right step. Each test
// rebuilds from the library what the trainer must do (the same task, seeds,
// model and first batches: a "replica") and checks the run's checkpoints and
// metrics.csv against it exactly (to float rounding), so a flag that were
// ignored, or applied one step early or late, fails here.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/splits.h"
#include "framework/io/checkpoint.h"
#include "framework/io/safetensors.h"
#include "framework/ops/loss.h"
#include "framework/optim/optimizer.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using namespace attnlab;
using attnlab::testing::read_summary;
using attnlab::testing::run_attnlab;
using attnlab::testing::run_attnlab_faults;
using attnlab::testing::TempDir;

namespace {

constexpr uint64_t kSeed = 7;       // not the default 0: a trainer ignoring --seed fails the replica
constexpr int64_t kBatch = 6;       // not the default 64, for the same reason
constexpr int64_t kHeldout = 20;
constexpr uint64_t kInitStream = 3;  // training/train_state.h's, written out: a changed stream would change every run of a seed
const std::string kCore =  // without --seed, --heldout and --clip, for the tests that set them
    " --task reverse --vocab 4 --min-len 4 --max-len 4 --d-model 16 --heads 2 --layers 1 --d-ff 32"
    " --batch-size 6 --threads 1 --quiet";
const std::string kData = " --heldout 20 --seed 7";
// --clip 0: the default clip of 1 would scale the gradients the replicas compare with.
const std::string kTiny = kCore + kData + " --clip 0";

using Params = std::map<std::string, Tensor>;

// Trains with `base` plus `flags` into DIR/NAME; returns the run directory.
std::string train(const TempDir& dir, const std::string& name, const std::string& flags, const std::string& env = "",
                  const std::string& base = kTiny) {
  const std::string run = dir / name;
  const std::string args = "train" + base + " " + flags + " --run " + run;
  const auto r = env.empty() ? run_attnlab(args) : run_attnlab_faults(args, env);  // env: injected faults
  INFO(r.out);
  REQUIRE(r.code == 0);
  return run;
}

std::string stem(const std::string& run, int64_t step) {
  std::ostringstream name;
  name << run << "/checkpoints/step-" << std::setw(8) << std::setfill('0') << step;
  return name.str();
}

Params weights_at(const std::string& run, int64_t step) {
  Params out;
  for (auto& [name, t] : load_safetensors(model_path(stem(run, step))).tensors) out[name] = t;
  return out;
}

// metrics.csv as rows of column -> text.
std::vector<std::map<std::string, std::string>> metrics(const std::string& run) {
  std::ifstream in(run + "/metrics.csv");
  REQUIRE(in);
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    return cells;
  };
  std::string line;
  std::getline(in, line);
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto cells = split(line);
    REQUIRE(cells.size() == header.size());
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

double number(const std::map<std::string, std::string>& row, const std::string& column) {
  return std::stod(row.at(column));
}

// The trainer's state rebuilt from the library, as documented: data seeds from
// derive_seed(seed, kHeldoutStream / kTrainStream), weights from kInitStream.
struct Replica {
  std::unique_ptr<Task> task;
  HeldOut heldout;
  std::unique_ptr<TrainStream> stream;
  std::unique_ptr<SequenceModel> model;
};

struct ReplicaOptions {
  uint64_t seed = kSeed;
  int64_t heldout = kHeldout;
  double dropout = 0, attn_dropout = 0;
  InitScheme init = TransformerConfig().init;  // the CLI's default scheme
  Positional positional = TransformerConfig().positional;
};

Replica make_replica(const ReplicaOptions& o = {}) {
  TaskConfig t;
  t.name = "reverse";
  t.vocab = 4;
  t.min_len = t.max_len = 4;
  t.seed = o.seed;
  Replica r;
  r.task = make_task(t);
  r.heldout = make_heldout(*r.task, o.heldout, derive_seed(o.seed, kHeldoutStream));
  r.stream = std::make_unique<TrainStream>(*r.task, r.heldout, derive_seed(o.seed, kTrainStream));
  TransformerConfig m;
  m.arch = Arch::encoder;
  m.d_model = 16;
  m.n_heads = 2;
  m.n_layers = 1;
  m.d_ff = 32;
  m.dropout = o.dropout;
  m.attn_dropout = o.attn_dropout;
  m.init = o.init;
  m.positional = o.positional;
  m.vocab_size = r.task->vocab_size();
  m.max_len = 64;  // the CLI's default table: max(64, 2 x the longest sequence)
  r.model = make_model(m, derive_seed(o.seed, kInitStream));
  return r;
}

Params values(const Module& model) {
  Params out;
  for (const auto& [name, v] : model.named_parameters()) out[name] = v.value();
  return out;
}

void set_values(Module& model, const Params& w) {
  for (auto& [name, v] : model.named_parameters()) {
    Var handle = v;
    handle.value() = w.at(name);
  }
}

// One step's forward and backward on the stream's next batch, at the model's current weights.
struct StepGrad {
  double loss = 0, norm = 0;
  Params grad;
  Tensor logits;      // (B, T, V)
  IntTensor targets;  // (B, T)
};

StepGrad next_gradient(Replica& r, double label_smoothing = 0) {
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);  // as the runs (--threads 1): the same sums in the same order
  FormattedBatch batch = format_batch(BatchFormat::encoder, to_pairs(r.stream->next_batch(kBatch)));
  r.model->zero_grad();
  Var logits = r.model->forward(batch.input);
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  ce.label_smoothing = static_cast<Real>(label_smoothing);
  Var loss = cross_entropy(logits, batch.targets, ce);
  backward(loss);
  omp_set_num_threads(saved_threads);
  StepGrad out;
  out.loss = loss.item();
  out.logits = logits.value();
  out.targets = batch.targets;
  double sum_sq = 0;
  for (const auto& [name, v] : r.model->named_parameters()) {
    out.grad[name] = v.has_grad() ? v.grad() : Tensor(v.value().shape());
    for (int64_t i = 0; i < v.grad().numel(); ++i) sum_sq += double(v.grad()[i]) * v.grad()[i];
  }
  out.norm = std::sqrt(sum_sq);
  return out;
}

// A per-element expected update: new value from (name, index, old value).
using Rule = std::function<double(const std::string&, int64_t, double)>;

// `after` holds `rule(before)` to float rounding, and the step moved something.
void require_update(const Params& before, const Params& after, const Rule& rule) {
  REQUIRE(after.size() == before.size());
  double moved = 0;
  for (const auto& [name, w0] : before) {
    const Tensor& w1 = after.at(name);
    REQUIRE(w1.shape() == w0.shape());
    for (int64_t i = 0; i < w0.numel(); ++i) {
      const double expected = rule(name, i, w0[i]);
      const double tol = 4 * FLT_EPSILON * std::max({double(std::fabs(w0[i])), std::fabs(expected), 1e-3}) +
                         1e-5 * std::fabs(expected - w0[i]);
      if (std::fabs(w1[i] - expected) > tol) {
        FAIL(name << "[" << i << "]: " << std::setprecision(9) << w1[i] << " after the step, expected " << expected
                  << " (was " << w0[i] << "; update ratio " << (w1[i] - w0[i]) / (expected - w0[i]) << ")");
      }
      moved += std::fabs(w1[i] - w0[i]);
    }
  }
  REQUIRE(moved > 0);
}

double sgd_rule(const StepGrad& g, double lr, double wd, bool decay_all, const std::string& name, int64_t i, double w) {
  const double decay = decay_all || !default_no_decay(name) ? wd : 0;
  return w - lr * (g.grad.at(name)[i] + decay * w);
}

// The smoothed cross-entropy written out (torch's convention): the target
// distribution is (1 - eps) onehot + eps / V, averaged over non-ignored positions.
double smoothed_cross_entropy(const Tensor& logits, const IntTensor& targets, double eps) {
  const int64_t V = logits.shape().back(), rows = logits.numel() / V;
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.data[static_cast<size_t>(r)] == kIgnoreTarget) continue;
    const Real* z = logits.data() + r * V;
    double max = z[0], sum = 0, mean_log_p = 0;
    for (int64_t k = 1; k < V; ++k) max = std::max<double>(max, z[k]);
    for (int64_t k = 0; k < V; ++k) sum += std::exp(z[k] - max);
    const double log_sum = max + std::log(sum);
    for (int64_t k = 0; k < V; ++k) mean_log_p += (z[k] - log_sum) / V;
    const double log_p_target = z[targets.data[static_cast<size_t>(r)]] - log_sum;
    total += -(1 - eps) * log_p_target - eps * mean_log_p;
    ++counted;
  }
  return total / counted;
}

}  // namespace

TEST_CASE("train lr column is the documented schedule formula at every step for constant linear cosine and noam with warmup",
          "[cli][flags]") {
  TempDir dir("flags-schedule");
  const double base = 0.01, min_lr = 0.001, pi = std::acos(-1.0);
  const int64_t w = 3, N = 8;
  auto decayed = [&](int64_t k, bool cosine) {
    const double q = std::clamp(double(k - w) / double(N - w), 0.0, 1.0);
    return min_lr + (base - min_lr) * (cosine ? (1 + std::cos(pi * q)) / 2 : 1 - q);
  };
  const std::map<std::string, std::function<double(int64_t)>> formula = {
      {"constant", [&](int64_t k) { return k <= w ? base * k / w : base; }},
      {"linear", [&](int64_t k) { return k <= w ? base * k / w : decayed(k, false); }},
      {"cosine", [&](int64_t k) { return k <= w ? base * k / w : decayed(k, true); }},
      {"noam", [&](int64_t k) { return 2.0 / std::sqrt(16.0) * std::min(1 / std::sqrt(double(k)), k / std::pow(w, 1.5)); }},
  };
  for (const auto& [name, lr_at] : formula) {
    const std::string flags = " --optimizer sgd --steps 8 --log-every 1 --eval-every 8 --warmup 3 --schedule " + name +
                              (name == "noam" ? " --lr 2" : " --lr 0.01") +
                              (name == "linear" || name == "cosine" ? " --min-lr 0.001" : "");
    const auto rows = metrics(train(dir, name, flags));
    REQUIRE(rows.size() == 8);
    for (int64_t k = 1; k <= N; ++k) {
      INFO("schedule " << name << ", step " << k);
      REQUIRE(number(rows[k - 1], "step") == k);
      REQUIRE(number(rows[k - 1], "lr") == Approx(lr_at(k)).epsilon(1e-12));
    }
  }
}

TEST_CASE("train sgd steps 1 and 2 are minus lr times fresh gradients of consecutive batches with L2 decay only where allowed",
          "[cli][flags]") {
  TempDir dir("flags-sgd");
  const std::string run = train(dir, "run", "--optimizer sgd --lr 0.1 --weight-decay 0.05 --steps 2 --eval-every 1 --log-every 1");
  Replica r = make_replica();
  const Params w0 = values(*r.model);
  const StepGrad g1 = next_gradient(r);
  require_update(w0, weights_at(run, 1),
                 [&](const std::string& n, int64_t i, double w) { return sgd_rule(g1, 0.1, 0.05, false, n, i, w); });
  // Step 2: the gradient at the step-1 weights on the next batch, not added to step 1's.
  set_values(*r.model, weights_at(run, 1));
  const StepGrad g2 = next_gradient(r);
  require_update(weights_at(run, 1), weights_at(run, 2),
                 [&](const std::string& n, int64_t i, double w) { return sgd_rule(g2, 0.1, 0.05, false, n, i, w); });
  const auto rows = metrics(run);
  REQUIRE(number(rows[0], "loss") == Approx(g1.loss).epsilon(1e-6));
  REQUIRE(number(rows[1], "loss") == Approx(g2.loss).epsilon(1e-6));
  REQUIRE(number(rows[0], "grad_norm") == Approx(g1.norm).epsilon(1e-5));
  // The rule above exempts some parameters (biases, LayerNorm, embeddings) and decays others: both occur.
  std::set<bool> exempt;
  for (const auto& [name, t] : w0) exempt.insert(default_no_decay(name));
  REQUIRE(exempt.size() == 2);
}

TEST_CASE("train decay-all applies sgd weight decay to biases LayerNorm and embeddings too", "[cli][flags]") {
  TempDir dir("flags-decay-all");
  const std::string run = train(dir, "run", "--optimizer sgd --lr 0.1 --weight-decay 0.05 --decay-all --steps 1");
  Replica r = make_replica();
  const Params w0 = values(*r.model);
  const StepGrad g1 = next_gradient(r);
  require_update(w0, weights_at(run, 1),
                 [&](const std::string& n, int64_t i, double w) { return sgd_rule(g1, 0.1, 0.05, true, n, i, w); });
}

TEST_CASE("train init gpt2 and torch start from their draws of the seed, auto picks by the positions, config.ini and "
          "the checkpoint record the scheme",
          "[cli][flags]") {
  TempDir dir("flags-init");
  struct Case {
    std::string name, flags, positional, scheme;
  };
  // auto: gpt2 beside learned positions, torch beside sinusoidal ones (the default positions).
  const std::vector<Case> cases = {{"gpt2", "--init gpt2", "sinusoidal", "gpt2"},
                                   {"torch", "--init torch --positional learned", "learned", "torch"},
                                   {"auto-sinusoidal", "", "sinusoidal", "torch"},
                                   {"auto-learned", "--positional learned", "learned", "gpt2"}};
  for (const Case& c : cases) {
    INFO(c.name);
    // An update of lr 1e-30 leaves every weight its initial value (to 1e-28): the checkpoint of step 1 is the init.
    const std::string run = train(dir, c.name, c.flags + " --optimizer sgd --lr 1e-30 --steps 1");
    ReplicaOptions want, other;
    want.init = parse_choice<InitScheme>("init", c.scheme);
    other.init = c.scheme == "gpt2" ? InitScheme::torch : InitScheme::gpt2;
    want.positional = other.positional = parse_choice<Positional>("positional", c.positional);
    const Params w0 = values(*make_replica(want).model), other_w0 = values(*make_replica(other).model);
    const Params w1 = weights_at(run, 1);
    REQUIRE(w1.size() == w0.size());
    bool differs_from_other = false;
    for (const auto& [name, t] : w0) {
      const Tensor& got = w1.at(name);
      REQUIRE(got.shape() == t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) {
        INFO(name << "[" << i << "]");
        REQUIRE(std::fabs(got[i] - t[i]) <= 1e-28 + 1e-7 * std::fabs(t[i]));
      }
      differs_from_other = differs_from_other || other_w0.at(name).flat() != t.flat();
    }
    REQUIRE(differs_from_other);  // the other scheme is another draw, so the check above tells them apart
    std::ifstream ini(run + "/config.ini");
    const std::string config((std::istreambuf_iterator<char>(ini)), std::istreambuf_iterator<char>());
    REQUIRE(config.find("init = " + c.scheme + "\n") != std::string::npos);
    const Metadata meta = load_safetensors(model_path(stem(run, 1))).metadata;
    REQUIRE(TransformerConfig::from_json(nlohmann::json::parse(meta.at("model_config"))).init == want.init);
  }
  const auto bad = run_attnlab("train" + kTiny + " --init xavier --run " + (dir / "bad"));
  REQUIRE(bad.code != 0);
  REQUIRE(bad.out.find("--init") != std::string::npos);
  REQUIRE(bad.out.find("xavier") != std::string::npos);
  REQUIRE_FALSE(fs::exists(dir / "bad"));
}

TEST_CASE("train warmup scales the very first update by 1 over warmup", "[cli][flags]") {
  TempDir dir("flags-warmup");
  const std::string run = train(dir, "run", "--optimizer sgd --lr 0.1 --weight-decay 0 --warmup 4 --steps 5 --eval-every 1 --keep 5");
  Replica r = make_replica();
  const Params w0 = values(*r.model);
  const StepGrad g1 = next_gradient(r);
  require_update(w0, weights_at(run, 1),
                 [&](const std::string& n, int64_t i, double w) { return sgd_rule(g1, 0.1 / 4, 0, false, n, i, w); });
}

TEST_CASE("train clip scales the step-1 update by clip over the gradient norm and logs the norm before clipping",
          "[cli][flags]") {
  TempDir dir("flags-clip");
  const std::string run = train(dir, "run", "--optimizer sgd --lr 0.1 --weight-decay 0 --clip 0.01 --steps 1", "", kCore + kData);
  Replica r = make_replica();
  const Params w0 = values(*r.model);
  const StepGrad g1 = next_gradient(r);
  REQUIRE(g1.norm > 0.1);  // so the clip of 0.01 shrinks the step at least tenfold
  const double c = 0.01 / (g1.norm + 1e-6);  // clip_grad_norm's coefficient (framework/optim/clip.h)
  require_update(w0, weights_at(run, 1),
                 [&](const std::string& n, int64_t i, double w) { return w - 0.1 * c * g1.grad.at(n)[i]; });
  REQUIRE(number(metrics(run).at(0), "grad_norm") == Approx(g1.norm).epsilon(1e-5));
}

TEST_CASE("train label-smoothing makes the step-1 loss the smoothed cross-entropy and the update its gradient",
          "[cli][flags]") {
  TempDir dir("flags-smoothing");
  // torch init: its logits are far from uniform, where smoothing would leave the loss (nearly) unchanged.
  const std::string run =
      train(dir, "run", "--init torch --optimizer sgd --lr 0.1 --weight-decay 0 --label-smoothing 0.2 --steps 1");
  ReplicaOptions torch_init;
  torch_init.init = InitScheme::torch;
  Replica r = make_replica(torch_init);
  const Params w0 = values(*r.model);
  const StepGrad g1 = next_gradient(r, 0.2);
  const double logged = number(metrics(run).at(0), "loss");
  REQUIRE(logged == Approx(smoothed_cross_entropy(g1.logits, g1.targets, 0.2)).epsilon(1e-5));
  REQUIRE(std::fabs(logged - smoothed_cross_entropy(g1.logits, g1.targets, 0)) > 1e-2);
  require_update(w0, weights_at(run, 1),
                 [&](const std::string& n, int64_t i, double w) { return sgd_rule(g1, 0.1, 0, false, n, i, w); });
}

TEST_CASE("train dropout and attn-dropout reach the model: the step-1 loss and update are the replica's with those masks",
          "[cli][flags]") {
  TempDir dir("flags-dropout");
  // torch init: gpt2's small weights make near-uniform attention and tiny sublayer outputs, which
  // dropout changes too little for the loss to tell it was applied.
  ReplicaOptions torch_init;
  torch_init.init = InitScheme::torch;
  Replica plain = make_replica(torch_init);
  const double plain_loss = next_gradient(plain).loss;
  for (const std::string which : {"dropout", "attn-dropout"}) {
    INFO("--" << which);
    const std::string run =
        train(dir, which, "--init torch --optimizer sgd --lr 0.1 --weight-decay 0 --steps 1 --" + which + " 0.3");
    ReplicaOptions o = torch_init;
    (which == "dropout" ? o.dropout : o.attn_dropout) = 0.3;
    Replica r = make_replica(o);
    const Params w0 = values(*r.model);
    const StepGrad g1 = next_gradient(r);
    const double logged = number(metrics(run).at(0), "loss");
    REQUIRE(logged == Approx(g1.loss).epsilon(1e-6));
    REQUIRE(std::fabs(logged - plain_loss) > 1e-3);
    require_update(w0, weights_at(run, 1),
                   [&](const std::string& n, int64_t i, double w) { return sgd_rule(g1, 0.1, 0, false, n, i, w); });
  }
}

TEST_CASE("train momentum leaves step 1 plain and adds mu times the buffer at step 2, nesterov looks ahead from step 1",
          "[cli][flags]") {
  TempDir dir("flags-momentum");
  for (const bool nesterov : {false, true}) {
    INFO("nesterov " << nesterov);
    const double lr = 0.1, mu = 0.9;
    const std::string run = train(dir, nesterov ? "nesterov" : "momentum",
                                  std::string("--optimizer sgd --lr 0.1 --weight-decay 0 --momentum 0.9 --steps 2 --eval-every 1") +
                                      (nesterov ? " --nesterov" : ""));
    Replica r = make_replica();
    const Params w0 = values(*r.model);
    const StepGrad g1 = next_gradient(r);
    require_update(w0, weights_at(run, 1), [&](const std::string& n, int64_t i, double w) {
      const double g = g1.grad.at(n)[i];  // buffer = g
      return w - lr * (nesterov ? g + mu * g : g);
    });
    set_values(*r.model, weights_at(run, 1));
    const StepGrad g2 = next_gradient(r);
    require_update(weights_at(run, 1), weights_at(run, 2), [&](const std::string& n, int64_t i, double w) {
      const double g = g2.grad.at(n)[i], buf = mu * g1.grad.at(n)[i] + g;
      return w - lr * (nesterov ? g + mu * buf : buf);
    });
  }
}

TEST_CASE("train adam beta1 beta2 and eps shape steps 1 and 2 as the bias-corrected Adam formula", "[cli][flags]") {
  TempDir dir("flags-adam");
  const double lr = 0.01, b1 = 0.5, b2 = 0.9, eps = 1e-3;
  const std::string run = train(
      dir, "run", "--optimizer adam --lr 0.01 --beta1 0.5 --beta2 0.9 --eps 0.001 --weight-decay 0 --steps 2 --eval-every 1");
  Replica r = make_replica();
  const Params w0 = values(*r.model);
  const StepGrad g1 = next_gradient(r);
  set_values(*r.model, weights_at(run, 1));
  const StepGrad g2 = next_gradient(r);
  // Moments after t updates, written out: m_t = b1 m + (1 - b1) g, v_t = b2 v + (1 - b2) g^2.
  auto update = [&](int t, double m, double v) {
    return lr / (1 - std::pow(b1, t)) * m / (std::sqrt(v) / std::sqrt(1 - std::pow(b2, t)) + eps);
  };
  require_update(w0, weights_at(run, 1), [&](const std::string& n, int64_t i, double w) {
    const double g = g1.grad.at(n)[i];
    return w - update(1, (1 - b1) * g, (1 - b2) * g * g);
  });
  require_update(weights_at(run, 1), weights_at(run, 2), [&](const std::string& n, int64_t i, double w) {
    const double a = g1.grad.at(n)[i], g = g2.grad.at(n)[i];
    const double m = b1 * (1 - b1) * a + (1 - b1) * g, v = b2 * (1 - b2) * a * a + (1 - b2) * g * g;
    return w - update(2, m, v);
  });
}

TEST_CASE("train adamw weight-decay shrinks decayed weights by lr times wd at step 1 and spares the exempt ones",
          "[cli][flags]") {
  TempDir dir("flags-adamw");
  const double lr = 0.01, wd = 0.5, eps = 1e-8;
  const std::string run = train(dir, "run", "--optimizer adamw --lr 0.01 --weight-decay 0.5 --steps 1");
  Replica r = make_replica();
  const Params w0 = values(*r.model);
  const StepGrad g1 = next_gradient(r);
  require_update(w0, weights_at(run, 1), [&](const std::string& n, int64_t i, double w) {
    const double g = g1.grad.at(n)[i], decay = default_no_decay(n) ? 0 : wd;
    return (1 - lr * decay) * w - lr * g / (std::fabs(g) + eps);  // bias-corrected m/sqrt(v) at t = 1 is g/|g|
  });
}

TEST_CASE("train seed changes the step-1 loss and weights and the same seed repeats metrics and checkpoints bitwise",
          "[cli][flags]") {
  TempDir dir("flags-seed");
  const std::string flags = "--optimizer sgd --lr 0.1 --steps 3 --log-every 1";
  const std::string a = train(dir, "a", flags + " --seed 7", "", kCore + " --heldout 20 --clip 0");
  const std::string b = train(dir, "b", flags + " --seed 7", "", kCore + " --heldout 20 --clip 0");
  const std::string c = train(dir, "c", flags + " --seed 8", "", kCore + " --heldout 20 --clip 0");
  auto without_time = [](std::vector<std::map<std::string, std::string>> rows) {
    for (auto& row : rows) row.erase("tokens_per_s"), row.erase("elapsed_s");
    return rows;
  };
  REQUIRE(without_time(metrics(a)) == without_time(metrics(b)));
  REQUIRE(testing::checkpoint_difference(model_path(stem(a, 3)), model_path(stem(b, 3))) == "");
  REQUIRE(metrics(a)[0].at("loss") != metrics(c)[0].at("loss"));
  REQUIRE(testing::checkpoint_difference(model_path(stem(a, 3)), model_path(stem(c, 3))) != "");
}

TEST_CASE("train eval-every log-every and keep place metric rows evaluations and checkpoints at exactly their steps",
          "[cli][flags]") {
  TempDir dir("flags-cadence");
  const std::string run = train(dir, "run", "--optimizer sgd --lr 0.1 --steps 12 --eval-every 4 --log-every 3 --keep 2");
  std::vector<int64_t> logged, evaluated;
  for (const auto& row : metrics(run)) {
    logged.push_back(std::stoll(row.at("step")));
    if (!row.at("heldout_exact").empty()) evaluated.push_back(std::stoll(row.at("step")));
    REQUIRE(row.at("heldout_exact").empty() == row.at("heldout_token_acc").empty());
  }
  REQUIRE(logged == std::vector<int64_t>{3, 4, 6, 8, 9, 12});
  REQUIRE(evaluated == std::vector<int64_t>{4, 8, 12});
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints")) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files == std::vector<std::string>{"step-00000008.optim.safetensors", "step-00000008.safetensors",
                                            "step-00000012.optim.safetensors", "step-00000012.safetensors"});
}

TEST_CASE("train heldout sets the held-out count and eval of the run reproduces its summary on the same examples",
          "[cli][flags]") {
  TempDir dir("flags-heldout");
  const std::string run = train(dir, "run", "--optimizer adam --lr 0.01 --heldout 13 --steps 40 --eval-every 40", "", kCore + " --seed 7");
  const auto summary = read_summary(run);
  REQUIRE(summary.at("heldout_examples") == 13);
  const double token = summary.at("heldout_token_acc"), exact = summary.at("heldout_exact");
  REQUIRE(token > 0);  // unsolved, so another held-out set would likely score otherwise
  REQUIRE(token < 1);
  const auto r = run_attnlab("eval --run " + run + " --examples 13");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::ostringstream figures;
  figures << std::fixed << std::setprecision(2) << "exact match     " << 100 * exact << "%\n"
          << "token accuracy  " << 100 * token << "%\n";
  REQUIRE(r.out.find(figures.str()) != std::string::npos);
  // The examples eval lists are the replica's held-out set, in draw order.
  ReplicaOptions o;
  o.heldout = 13;
  const Replica replica = make_replica(o);
  size_t at = r.out.find(figures.str());
  for (const Example& e : replica.heldout.examples()) {
    at = r.out.find("  " + replica.task->to_text(e.input) + "  ->  ", at);
    REQUIRE(at != std::string::npos);
  }
}

TEST_CASE("train target stops at the first evaluation that reaches it", "[cli][flags]") {
  TempDir dir("flags-target");
  const std::string flags = "--optimizer adam --lr 0.01 --steps 300 --eval-every 10";
  const auto rows = metrics(train(dir, "free", flags));
  double target = 0;  // the first positive held-out exact match of the free run
  int64_t first = -1;
  for (const auto& row : rows)
    if (!row.at("heldout_exact").empty() && number(row, "heldout_exact") > 0) {
      target = number(row, "heldout_exact");
      first = std::stoll(row.at("step"));
      break;
    }
  REQUIRE(first > 0);
  REQUIRE(first < 300);
  std::ostringstream t;
  t << std::setprecision(17) << target;
  const std::string run = train(dir, "target", flags + " --target " + t.str());
  const auto summary = read_summary(run);
  REQUIRE(summary.at("solved_at_step") == first);
  REQUIRE(summary.at("steps") == first);
  REQUIRE(std::stoll(metrics(run).back().at("step")) == first);
}

TEST_CASE("train target-patience stops once the target held at that many consecutive evaluations, solved at the first",
          "[cli][flags]") {
  TempDir dir("flags-patience");
  const std::string flags = "--optimizer adam --lr 0.01 --steps 300 --eval-every 10";
  std::vector<std::pair<int64_t, double>> evals;  // (step, held-out exact match) of the free run
  for (const auto& row : metrics(train(dir, "free", flags)))
    if (!row.at("heldout_exact").empty()) evals.emplace_back(std::stoll(row.at("step")), number(row, "heldout_exact"));
  // The rule, written out: a streak of evaluations at or above the target; solved at its first once it is K long.
  struct Expected {
    int64_t first = -1, solved = -1, stop = -1;
  };
  const int64_t patience = 3;
  auto expect = [&](double target) {
    Expected e;
    int64_t streak = 0, start = -1;
    for (const auto& [step, exact] : evals) {
      if (exact < target) {
        streak = 0;
        continue;
      }
      if (e.first < 0) e.first = step;
      if (streak++ == 0) start = step;
      if (streak == patience) return Expected{e.first, start, step};
    }
    return e;
  };
  // A target the free run reaches, loses and later holds: patience makes a difference there.
  double target = -1;
  for (const auto& [step, exact] : evals) {
    const Expected e = expect(exact);
    if (exact > 0 && e.solved > e.first) {
      target = exact;
      break;
    }
  }
  REQUIRE(target > 0);
  const Expected e = expect(target);
  std::ostringstream t;
  t << std::setprecision(17) << target;
  const std::string run = train(dir, "held", flags + " --target " + t.str() + " --target-patience 3");
  const auto summary = read_summary(run);
  CHECK(summary.at("target_patience") == patience);
  CHECK(summary.at("target_first_reached_at_step") == e.first);
  CHECK(summary.at("solved_at_step") == e.solved);
  CHECK(summary.at("steps") == e.stop);
  CHECK(std::stoll(metrics(run).back().at("step")) == e.stop);
  // Without patience the same target stops the run at its first evaluation reaching it.
  const auto once = read_summary(train(dir, "once", flags + " --target " + t.str()));
  CHECK(once.at("solved_at_step") == e.first);
  CHECK(once.at("steps") == e.first);
  const auto bad = run_attnlab("train" + kTiny + " --target-patience 0 --run " + (dir / "bad"));
  REQUIRE(bad.code != 0);
  REQUIRE(bad.out.find("--target-patience") != std::string::npos);
}

TEST_CASE("train probe-every writes probe rows at step 1 and at its multiples only", "[cli][flags]") {
  TempDir dir("flags-probe");
  const std::string run = train(dir, "run", "--optimizer sgd --lr 0.1 --steps 7 --probe-every 3");
  std::ifstream in(run + "/probe_params.csv");
  REQUIRE(in);
  std::string line;
  std::getline(in, line);
  std::set<int64_t> steps;
  while (std::getline(in, line)) steps.insert(std::stoll(line.substr(0, line.find(','))));
  REQUIRE(steps == std::set<int64_t>{1, 3, 6});
}

TEST_CASE("train on-nan skip leaves the weights of a poisoned step untouched and stop ends the run there",
          "[cli][flags]") {
  TempDir dir("flags-on-nan");
  const std::string env = "ATTNLAB_DEBUG_NAN_AT_STEP=2";
  const std::string flags = "--optimizer sgd --lr 0.1 --weight-decay 0 --steps 3 --eval-every 1 --keep 5";
  const std::string run = train(dir, "skip", flags + " --on-nan skip", env);
  REQUIRE(testing::checkpoint_difference(model_path(stem(run, 1)), model_path(stem(run, 2))) == "");
  // Step 3 trains on the third batch: the skipped step's batch is consumed, not retried.
  Replica r = make_replica();
  next_gradient(r);
  next_gradient(r);
  set_values(*r.model, weights_at(run, 2));
  const StepGrad g3 = next_gradient(r);
  require_update(weights_at(run, 2), weights_at(run, 3),
                 [&](const std::string& n, int64_t i, double w) { return sgd_rule(g3, 0.1, 0, false, n, i, w); });
  const auto stopped = run_attnlab_faults("train" + kTiny + " " + flags + " --on-nan stop --run " + (dir / "stop"), env);
  REQUIRE(stopped.code == 1);
  REQUIRE(fs::exists(model_path(stem(dir / "stop", 1))));
  REQUIRE_FALSE(fs::exists(model_path(stem(dir / "stop", 2))));
}
