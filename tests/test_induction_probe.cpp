// The induction scores (framework/probe/induction_scores.h) on hand-made
// attention patterns, the embedding's Fourier spectrum (framework/probe/fourier.h)
// on embeddings of known frequencies, and the training probes around them
// (training/induction_probe.h, training/fourier_probe.h) in a Trainer: their
// rows are the model's own scores and spectrum, and a probed run's weights
// are bitwise an unprobed one's.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <set>

#include "framework/error.h"
#include "framework/io/csv.h"
#include "framework/probe/fourier.h"
#include "framework/probe/induction_scores.h"
#include "framework/random.h"
#include "tests/cli_harness.h"
#include "tests/tiny_training.h"
#include "training/trainer.h"

using namespace attnlab;
using attnlab::testing::TempDir;

namespace {

const double kPi = std::acos(-1.0);

// (B, h, T, T) with each row i of head `head` of every batch row one-hot on key(i).
void one_hot_rows(Tensor& w, int64_t head, const std::function<int64_t(int64_t)>& key) {
  const int64_t B = w.size(0), h = w.size(1), T = w.size(2);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) {
      Real* row = w.data() + ((b * h + head) * T + i) * T;
      std::fill(row, row + T, Real(0));
      row[key(i)] = 1;
    }
}

}  // namespace

TEST_CASE("a previous-token head scores previous_token 1 and prefix_matching 0, an induction head the reverse",
          "[induction]") {
  const int64_t first = 1, n = 4, T = first + 2 * n;  // [bos] x0..x3 x0..x3
  Tensor w({2, 2, T, T});
  one_hot_rows(w, 0, [](int64_t i) { return i == 0 ? 0 : i - 1; });
  // Head 1: each query of the repeat on the token after its earlier occurrence, the others on [bos].
  one_hot_rows(w, 1, [&](int64_t i) { return i >= first + n ? i - n + 1 : 0; });
  const std::vector<InductionScores> s = induction_scores(w, first, n);
  REQUIRE(s.size() == 2);
  CHECK(s[0].head == 0);
  CHECK(s[0].previous_token == 1);
  CHECK(s[0].prefix_matching == 0);
  CHECK(s[1].head == 1);
  CHECK(s[1].prefix_matching == 1);
  CHECK(s[1].previous_token == Approx(1.0 / (T - 1)));  // only query 1 looks at [bos] = its previous position
}

TEST_CASE("induction scores average over the batch and the exact query positions documented", "[induction]") {
  const int64_t first = 0, n = 3, T = 7;  // a trailing position after the repeat is not scored for prefix matching
  Tensor w({2, 1, T, T});
  for (int64_t b = 0; b < 2; ++b)  // causal uniform rows: w[i, j] = 1/(i+1) for j <= i
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= i; ++j) w.data()[(b * T + i) * T + j] = static_cast<Real>(1.0 / (i + 1));
  // Batch row 1 puts query 5's weight on key 3 = 5 - n + 1 only.
  Real* row5 = w.data() + (T + 5) * T;
  std::fill(row5, row5 + T, Real(0));
  row5[3] = 1;
  double prefix = 0, previous = 0;
  for (int64_t i = n; i < 2 * n; ++i) prefix += 1.0 / (i + 1);  // row 0: queries 3, 4, 5
  prefix += 1.0 / 4 + 1.0 / 5 + 1.0;                            // row 1
  for (int64_t i = 1; i < T; ++i) previous += 2.0 / (i + 1);
  previous -= 1.0 / 6;  // row 1's query 5 gives key 4 nothing
  const std::vector<InductionScores> s = induction_scores(w, first, n);
  REQUIRE(s.size() == 1);
  CHECK(s[0].prefix_matching == Approx(prefix / 6).epsilon(1e-6));
  CHECK(s[0].previous_token == Approx(previous / 12).epsilon(1e-6));
}

TEST_CASE("induction scores refuse a pattern too short for the repeat, or not square", "[induction]") {
  CHECK_THROWS_AS(induction_scores(Tensor({1, 1, 6, 6}), 1, 3), ShapeError);  // needs 7 positions
  CHECK_NOTHROW(induction_scores(Tensor({1, 1, 7, 7}), 1, 3));
  CHECK_THROWS_AS(induction_scores(Tensor({1, 1, 7, 6}), 0, 3), ShapeError);
  CHECK_THROWS_AS(induction_scores(Tensor({1, 7, 7}), 0, 3), ShapeError);
  CHECK_THROWS_AS(induction_scores(Tensor({1, 1, 7, 7}), 0, 0), ValueError);
}

TEST_CASE("an embedding built of known frequencies has its whole spectrum there", "[fourier]") {
  const int64_t p = 13;
  Tensor E({p, 3});
  for (int64_t a = 0; a < p; ++a) {
    E.data()[a * 3 + 0] = static_cast<Real>(std::cos(2 * kPi * 5 * a / p));      // frequency 5: norm p/2
    E.data()[a * 3 + 1] = 0.5f;                                                   // the constant: ‖Σ_a‖ = p/2
    E.data()[a * 3 + 2] = static_cast<Real>(3 * std::sin(2 * kPi * 2 * a / p));  // frequency 2: norm 3p/2
  }
  const std::vector<double> f = fourier_norms(E);
  REQUIRE(f.size() == 7);  // k = 0 .. 6
  for (int64_t k = 0; k < 7; ++k) {
    const double want = k == 5 ? p / 2.0 : k == 2 ? 3 * p / 2.0 : k == 0 ? p / 2.0 : 0;
    INFO("k = " << k);
    CHECK(f[static_cast<size_t>(k)] == Approx(want).margin(1e-5));
  }
}

TEST_CASE("the Fourier norms keep Parseval's sum for odd and even p", "[fourier]") {
  for (int64_t p : {7, 8}) {
    Rng rng(static_cast<uint64_t>(p));
    Tensor E({p, 4});
    double energy = 0;
    for (int64_t i = 0; i < E.numel(); ++i) {
      E.data()[i] = static_cast<Real>(rng.uniform() - 0.5);
      energy += static_cast<double>(E.data()[i]) * E.data()[i];
    }
    const std::vector<double> f = fourier_norms(E);
    REQUIRE(static_cast<int64_t>(f.size()) == p / 2 + 1);
    double sum = 0;
    for (int64_t k = 0; k <= p / 2; ++k) {
      const double m = k == 0 || 2 * k == p ? 1 : 2;
      sum += m * f[static_cast<size_t>(k)] * f[static_cast<size_t>(k)];
    }
    INFO("p = " << p);
    CHECK(sum / p == Approx(energy).epsilon(1e-9));
  }
  CHECK_THROWS_AS(fourier_norms(Tensor({5})), ShapeError);
}

TEST_CASE("the induction probe's layout: bos for a decoder, none bare or for text, n fits training's positions",
          "[induction]") {
  TrainSettings s = testing::tiny_reverse_settings();  // reverse over 4 symbols of length 4
  s.model.arch = Arch::decoder;
  finalize(s);
  const std::unique_ptr<Task> task = make_task(s.task);
  InductionLayout l = induction_layout(*task, s.model);
  CHECK(l.first == 1);
  CHECK(l.n == 4);  // min(32, 4 symbols, (4 + 4 + 2 - 1) / 2 rounded down)
  s.task.vocab = 3;
  finalize(s);
  CHECK(induction_layout(*make_task(s.task), s.model).n == 3);  // the symbols
  s.task.vocab = 12;
  finalize(s);
  CHECK(induction_layout(*make_task(s.task), s.model).n == 4);  // the positions
  s.model.layout = Layout::bare;
  finalize(s);
  l = induction_layout(*make_task(s.task), s.model);
  CHECK(l.first == 0);
  CHECK(l.n == 3);  // (4 + 4 - 1) / 2
  s.model.arch = Arch::encoder;
  s.model.layout = Layout::special;
  CHECK_THROWS_WITH(induction_layout(*make_task(s.task), s.model),
                    Catch::Contains("--probe-induction reads a decoder-only model's causal self-attention: use "
                                    "--model decoder, not encoder"));
  s.model.arch = Arch::seq2seq;
  CHECK_THROWS_WITH(induction_layout(*make_task(s.task), s.model), Catch::Contains("not seq2seq"));
  s.model.arch = Arch::decoder;
  s.task.vocab = 2;
  CHECK(induction_layout(*make_task(s.task), s.model).n == 2);
  s.model.layout = Layout::bare;  // copy of 2 symbols: 3 positions, room for 1 symbol repeated
  s.task.name = "copy";
  s.task.min_len = s.task.max_len = 2;
  CHECK_THROWS_WITH(induction_layout(*make_task(s.task), s.model),
                    Catch::Contains("--probe-induction repeats a sequence of at least 2 distinct symbols, but task "
                                    "'copy' has 2 symbols and training sequences of length 3"));
}

TEST_CASE("on text the induction probe repeats characters with no bos, within the training window", "[induction]") {
  TempDir dir("induction-text-layout");
  std::ofstream(dir / "text.txt") << "the quick brown fox jumps over the lazy dog, again and again and again\n";
  TrainSettings s = default_settings();
  s.task.name = "text";
  s.task.file = dir / "text.txt";
  s.task.seq_len = 12;
  s.model.arch = Arch::decoder;
  finalize(s);
  const InductionLayout l = induction_layout(*make_task(s.task), s.model);
  CHECK(l.first == 0);
  CHECK(l.n == 6);  // min(32, the characters, 12 / 2)
}

TEST_CASE("the induction batch: bos, n distinct task symbols, the same n again, one seed, one batch", "[induction]") {
  InductionLayout l;
  l.first = 1;
  l.n = 5;
  const ModelInput a = induction_batch(l, 4 + 9, 7), b = induction_batch(l, 4 + 9, 7), c = induction_batch(l, 4 + 9, 8);
  REQUIRE(a.tgt_in.shape == Shape{kInductionSequences, 11});
  CHECK(a.tgt_in.data == b.tgt_in.data);
  CHECK(a.tgt_in.data != c.tgt_in.data);
  for (float pad : a.tgt_pad.flat()) CHECK(pad == 0);
  std::set<std::vector<int32_t>> distinct;
  for (int64_t r = 0; r < kInductionSequences; ++r) {
    const int32_t* row = a.tgt_in.data.data() + r * 11;
    CHECK(row[0] == SpecialTokens::bos);
    std::set<int32_t> seen(row + 1, row + 6);
    CHECK(seen.size() == 5);
    CHECK(*seen.begin() >= 4);
    CHECK(*seen.rbegin() < 13);
    CHECK(std::equal(row + 1, row + 6, row + 6));
    distinct.insert(std::vector<int32_t>(row + 1, row + 6));
  }
  CHECK(distinct.size() > 1);
  // Every position of the copy is drawn: over the 16 rows each takes several symbols (a position left out of
  // the shuffle would hold the same one in every row; 9 symbols make 16 equal draws a 1 in 9^15 chance).
  for (int64_t i = 1; i < 6; ++i) {
    std::set<int32_t> column;
    for (int64_t r = 0; r < kInductionSequences; ++r) column.insert(a.tgt_in.data[static_cast<size_t>(r * 11 + i)]);
    INFO("position " << i);
    CHECK(column.size() > 1);
  }
}

namespace {

TrainSettings tiny_decoder(int64_t probe_induction) {
  TrainSettings s = testing::tiny_reverse_settings();
  s.model.arch = Arch::decoder;
  s.model.n_layers = 2;
  s.model.dropout = 0.1;  // the probe turns dropout off and must not draw from its stream
  s.task.vocab = 8;
  s.steps = 6;
  s.eval_every = 3;
  s.batch_size = 8;
  s.target = 0;
  s.probe_induction = probe_induction;
  finalize(s);
  return s;
}

std::string field(const CsvTable& t, size_t row, const std::string& column) {
  const auto at = std::find(t.columns.begin(), t.columns.end(), column);
  REQUIRE(at != t.columns.end());
  return t.rows[row][static_cast<size_t>(at - t.columns.begin())];
}

}  // namespace

TEST_CASE("the induction probe writes each head's scores at step 1 and every N-th, the model's own, and changes "
          "nothing", "[induction][training]") {
  TempDir dir("induction-probe-trainer");
  TrainState plain(tiny_decoder(0)), probed(tiny_decoder(2));
  TrainerOptions o;
  o.run_dir = dir / "plain";
  Trainer(plain, o).run();
  o.run_dir = dir / "probed";
  Trainer(probed, o).run();
  // Bitwise the same weights.
  const auto a = plain.model().named_parameters(), b = probed.model().named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(std::equal(a[i].second.value().data(), a[i].second.value().data() + a[i].second.numel(),
                     b[i].second.value().data()));
  }
  CHECK(plain.model().training() == probed.model().training());
  CHECK_FALSE(std::filesystem::exists(dir / "plain/probe_induction.csv"));
  const CsvTable t = read_csv(dir / "probed/probe_induction.csv", 1 << 20);
  REQUIRE(t.columns == TrainingInduction::columns());
  REQUIRE(t.rows.size() == 4 * 2 * 2);  // steps 1, 2, 4, 6 x 2 layers x 2 heads
  const std::vector<std::string> steps = {"1", "2", "4", "6"}, layers = {"blocks.0.attn", "blocks.1.attn"};
  for (size_t r = 0; r < t.rows.size(); ++r) {
    CHECK(field(t, r, "step") == steps[r / 4]);
    CHECK(field(t, r, "layer") == layers[(r / 2) % 2]);
    CHECK(field(t, r, "head") == std::to_string(r % 2));
    for (const char* c : {"prefix_matching", "previous_token"}) {
      const double v = std::stod(field(t, r, c));
      CHECK(v > 0);
      CHECK(v < 1);
    }
  }
  // The last step's rows: the final model's patterns on the documented batch, scored again here.
  probed.model().eval();
  NoGradGuard no_graph;
  std::vector<Var> patterns(2);
  for (int l = 0; l < 2; ++l)
    probed.model().hooks().observe("blocks." + std::to_string(l) + ".attn.pattern",
                                   [&patterns, l](const std::string&, const Var& w) { patterns[static_cast<size_t>(l)] = w; });
  const InductionLayout layout = induction_layout(probed.task(), probed.settings().model);
  CHECK(layout.first == 1);
  CHECK(layout.n == 4);  // (4 + 4 + 2 - 1) / 2 rounded down
  probed.model().forward(induction_batch(layout, probed.settings().model.vocab_size, derive_seed(0, kInductionStream)));
  probed.model().hooks().clear();
  for (size_t l = 0; l < 2; ++l) {
    const std::vector<InductionScores> s = induction_scores(patterns[l].value(), layout.first, layout.n);
    for (size_t h = 0; h < 2; ++h) {
      const size_t row = 12 + 2 * l + h;
      CHECK(std::stod(field(t, row, "prefix_matching")) == Approx(s[h].prefix_matching).epsilon(1e-5));
      CHECK(std::stod(field(t, row, "previous_token")) == Approx(s[h].previous_token).epsilon(1e-5));
    }
  }
}

TEST_CASE("a modular run writes its embedding's spectrum at every evaluation, the last the trained embedding's",
          "[fourier][training]") {
  TempDir dir("fourier-probe-trainer");
  TrainSettings s = default_settings();
  s.task.name = "modular";
  s.task.modulus = 11;
  s.model.d_model = 16;
  s.model.n_heads = 2;
  s.model.n_layers = 1;
  s.model.d_ff = 32;
  s.steps = 5;
  s.eval_every = 2;
  s.batch_size = 16;
  s.target = 0;
  finalize(s);
  TrainState state(s);
  TrainerOptions o;
  o.run_dir = dir / "run";
  Trainer(state, o).run();
  const CsvTable t = read_csv(dir / "run/embedding_fourier.csv", 1 << 20);
  REQUIRE(t.columns == TrainingFourier::columns());
  REQUIRE(t.rows.size() == 3 * 6);  // steps 2, 4, 5 x frequencies 0..5
  for (size_t r = 0; r < t.rows.size(); ++r) {
    CHECK(field(t, r, "step") == std::vector<std::string>{"2", "4", "5"}[r / 6]);
    CHECK(field(t, r, "frequency") == std::to_string(r % 6));
  }
  const Tensor rows = residue_embedding(state);
  REQUIRE(rows.shape() == Shape{11, 16});
  for (const auto& [name, var] : state.model().named_parameters())
    if (name == "tok_emb.weight")  // residue a is token 4 + a
      CHECK(std::equal(rows.data(), rows.data() + rows.numel(), var.value().data() + 4 * 16));
  const std::vector<double> f = fourier_norms(rows);
  for (size_t k = 0; k < 6; ++k) CHECK(std::stod(field(t, 12 + k, "norm")) == f[k]);
  // Other tasks write none.
  TrainState copy(tiny_decoder(0));
  CHECK_FALSE(records_fourier(copy));
  CHECK(records_fourier(state));
}
