// The training library (training/) without the CLI: the Trainer's outcomes,
// its hooks, interrupts, the NaN policy, checkpoints and their retention,
// resume, metrics rows, and a task of the caller's own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "datasets/vocab.h"
#include "framework/io/checkpoint.h"
#include "framework/io/safetensors.h"
#include "framework/optim/schedule.h"
#include "tests/cli_harness.h"
#include "tests/tiny_training.h"
#include "training/trainer.h"

namespace fs = std::filesystem;
using namespace attnlab;
using attnlab::testing::metrics_without_times;
using attnlab::testing::TempDir;

namespace {

// tests/tiny_training.h's setting, batch 6, seed 7.
TrainSettings tiny(int64_t steps) {
  TrainSettings s = attnlab::testing::tiny_reverse_settings();
  s.batch_size = 6;
  s.seed = 7;
  s.steps = steps;
  s.eval_every = 4;
  s.log_every = 2;
  s.target = 0;
  finalize(s);
  return s;
}

std::map<std::string, std::vector<Real>> weights(const Module& model) {
  std::map<std::string, std::vector<Real>> out;
  for (const auto& [name, v] : model.named_parameters())
    out[name] = std::vector<Real>(v.value().data(), v.value().data() + v.numel());
  return out;
}

// Parity of a bit string: a task of a user's own, for finalize and TrainState.
class ParityTask : public Task {
 public:
  ParityTask() : Task(config(), Vocab::numbered(2)) {}
  std::string name() const override { return "parity"; }
  std::string describe() const override { return "parity of 3 bits"; }
  std::vector<int32_t> sample_input(Rng& rng) const override {
    std::vector<int32_t> bits(3);
    for (auto& b : bits) b = Vocab::symbol_id(static_cast<int64_t>(rng.uniform(0, 2)) % 2);
    return bits;
  }
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    int64_t ones = 0;
    for (int32_t id : input) ones += id == Vocab::symbol_id(1);
    return {Vocab::symbol_id(ones % 2)};
  }
  int64_t min_input_len() const override { return 3; }
  int64_t max_input_len() const override { return 3; }
  int64_t max_output_len() const override { return 1; }
  int64_t input_space_size() const override { return 8; }

 private:
  static TaskConfig config() {
    TaskConfig c;
    c.name = "parity";
    return c;
  }
};

}  // namespace

TEST_CASE("Trainer without a run directory trains every step, evaluates the held-out set and writes nothing",
          "[training]") {
  TempDir dir("training-nofiles");
  const fs::path before = fs::current_path();
  fs::current_path(dir.path);
  TrainState state(tiny(6));
  int64_t shown = 0, last = 0;
  TrainerOptions o;
  o.on_step = [&](const ProgressStats& p) {
    ++shown;
    last = p.step;
  };
  const TrainOutcome out = Trainer(state, o).run();
  fs::current_path(before);
  CHECK(out.end == TrainEnd::finished);
  CHECK(out.last_step == 6);
  CHECK(state.step == 6);
  CHECK(shown == 6);
  CHECK(last == 6);
  CHECK(out.heldout.accuracy.sequences == 20);
  // The score is the model's: evaluating it again gives the same figures.
  const Accuracy again = greedy_accuracy(state.model(), state.heldout(), 256);
  CHECK(out.heldout.accuracy.token == again.token);
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("train_step's learning rate is the schedule's at its own step and the hooks run once per step",
          "[training]") {
  TrainSettings s = tiny(10);
  s.schedule.kind = ScheduleKind::linear;
  s.schedule.warmup = 3;
  s.schedule.total_steps = 10;
  TrainState state(s);
  int64_t backward_calls = 0, update_calls = 0;
  StepHooks hooks;
  hooks.after_backward = [&](TrainState& st, double&) { backward_calls += st.step; };
  hooks.after_update = [&](TrainState&) { ++update_calls; };
  for (int64_t k = 1; k <= 5; ++k) {
    const StepResult r = train_step(state, hooks);
    CHECK(r.step == k);
    CHECK(r.finite);
    CHECK(r.lr == scheduled_lr(s.schedule, s.optim.lr, k));
    CHECK(state.optimizer().lr() == r.lr);
  }
  CHECK(backward_calls == 1 + 2 + 3 + 4 + 5);  // at each step's own step count
  CHECK(update_calls == 5);
}

TEST_CASE("a NaN gradient from a hook stops the run under on_nan stop and leaves the weights untouched under skip",
          "[training][nan]") {
  const std::string victim = "head.weight";
  StepHooks poison;
  poison.after_backward = [&](TrainState& st, double&) {
    if (st.step == 3) st.model().parameter(victim).grad()[0] = std::numeric_limits<Real>::quiet_NaN();
  };
  SECTION("stop") {
    TrainState state(tiny(6));
    TrainerOptions o;
    o.hooks = poison;
    const TrainOutcome out = Trainer(state, o).run();
    CHECK(out.end == TrainEnd::nonfinite);
    CHECK(out.last_step == 3);
    CHECK(out.problem.rfind("non-finite gradient at step 3 (loss ", 0) == 0);
    CHECK(out.problem.find("first parameter affected: " + victim + ")") != std::string::npos);
    CHECK(out.policy == "--on-nan stop");
  }
  SECTION("skip") {
    TrainSettings s = tiny(3);
    s.on_nan = OnNan::skip;
    TrainState state(s);
    for (int k = 0; k < 2; ++k) train_step(state);
    const auto after_two = weights(state.model());
    std::vector<std::string> warnings;
    TrainerOptions o;
    o.hooks = poison;
    o.on_warning = [&](const std::string& w) { warnings.push_back(w); };
    const TrainOutcome out = Trainer(state, o).run();
    CHECK(out.end == TrainEnd::finished);
    CHECK(state.step == 3);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("non-finite gradient at step 3") == 0);
    CHECK(warnings[0].find("step skipped (--on-nan skip)") != std::string::npos);
    CHECK(weights(state.model()) == after_two);
  }
}

TEST_CASE("a weight an update makes infinite stops the run at that step's log row, before its checkpoint, under either "
          "policy", "[training][nan]") {
  for (const std::string policy : {"stop", "skip"}) {
    TrainSettings s = tiny(8);
    s.on_nan = parse_choice<OnNan>("on_nan", policy);
    TrainState state(s);
    TempDir dir("training-infweight-" + policy);
    TrainerOptions o;
    o.run_dir = dir / "run";
    o.hooks.after_update = [](TrainState& st) {
      if (st.step == 4) st.model().parameter("head.bias").value()[1] = std::numeric_limits<Real>::infinity();
    };
    const TrainOutcome out = Trainer(state, o).run();
    INFO(policy);
    CHECK(out.end == TrainEnd::nonfinite);
    CHECK(out.last_step == 4);  // a log row and an evaluation step
    CHECK(out.problem == "non-finite parameter value after step 4 (first parameter affected: head.bias)");
    CHECK(CheckpointStore(dir / "run/checkpoints").steps().empty());
  }
}

TEST_CASE("an interrupt after a step checkpoints that step, and resuming from it gives bitwise the uninterrupted run",
          "[training][resume]") {
  TempDir dir("training-resume");
  const TrainSettings s = tiny(8);
  {
    TrainState state(s);
    TrainerOptions o;
    o.run_dir = dir / "whole";
    REQUIRE(Trainer(state, o).run().end == TrainEnd::finished);
  }
  {
    TrainState state(s);
    TrainerOptions o;
    o.run_dir = dir / "split";
    // After step 6: a log row (so the rows after it average the same steps) but not a checkpoint step.
    o.stop_requested = [&state] { return state.step == 6; };
    const TrainOutcome out = Trainer(state, o).run();
    CHECK(out.end == TrainEnd::interrupted);
    CHECK(out.last_step == 6);
    CHECK(CheckpointStore(dir / "split/checkpoints").steps() == std::vector<int64_t>{4, 6});
  }
  TrainState resumed(s);
  TrainerOptions o;
  o.run_dir = dir / "split";
  o.resume = true;
  Trainer trainer(resumed, o);
  CHECK(resumed.step == 6);
  REQUIRE(trainer.run().end == TrainEnd::finished);
  const std::string whole = CheckpointStore(dir / "whole/checkpoints").stem(8);
  const std::string split = CheckpointStore(dir / "split/checkpoints").stem(8);
  CHECK(testing::checkpoint_difference(model_path(whole), model_path(split)) == "");
  CHECK(testing::checkpoint_difference(optimizer_path(whole), optimizer_path(split)) == "");
  CHECK(metrics_without_times(dir / "whole/metrics.csv") == metrics_without_times(dir / "split/metrics.csv"));
}

TEST_CASE("checkpoints are written at every evaluation and the last step, and only the newest `keep` stay",
          "[training][checkpoints]") {
  TempDir dir("training-keep");
  TrainSettings s = tiny(10);
  s.keep = 2;
  TrainState state(s);
  TrainerOptions o;
  o.run_dir = dir / "run";
  Trainer(state, o).run();
  CHECK(CheckpointStore(dir / "run/checkpoints").steps() == std::vector<int64_t>{8, 10});
  const Metadata meta = read_checkpoint_metadata(CheckpointStore(dir / "run/checkpoints").stem(10));
  CHECK(meta.at("step") == "10");
  CHECK(meta.at("data_stream") == state.stream().state());
}

TEST_CASE("metrics rows average the steps since the previous row, held-out columns are filled at evaluations",
          "[training][metrics]") {
  TempDir dir("training-metrics");
  TrainSettings s = tiny(4);
  TrainState state(s);
  std::vector<double> losses;
  TrainerOptions o;
  o.run_dir = dir / "run";
  // The losses of steps 1..4, from a twin state trained step by step.
  TrainState twin(s);
  for (int k = 0; k < 4; ++k) losses.push_back(train_step(twin).loss);
  Trainer(state, o).run();
  std::istringstream in(metrics_without_times(dir / "run/metrics.csv"));
  std::string header, row2, row4;
  std::getline(in, header);
  std::getline(in, row2);
  std::getline(in, row4);
  CHECK(row2.rfind("2," + CsvWriter::format_number((losses[0] + losses[1]) / 2) + ",", 0) == 0);
  CHECK(row4.rfind("4," + CsvWriter::format_number((losses[2] + losses[3]) / 2) + ",", 0) == 0);
  // Step 2 is not an evaluation (eval_every 4): its held-out cells are empty; step 4's are not.
  const auto cell = [&](const std::string& row, const std::string& column) {
    std::vector<std::string> names(1), cells(1);
    for (char c : header) {
      if (c == ',') names.emplace_back();
      else names.back() += c;
    }
    for (char c : row) {
      if (c == ',') cells.emplace_back();
      else cells.back() += c;
    }
    return cells.at(static_cast<size_t>(std::find(names.begin(), names.end(), column) - names.begin()));
  };
  for (const std::string column : {"heldout_token_acc", "heldout_exact"}) {
    CHECK(cell(row2, column).empty());
    CHECK(!cell(row4, column).empty());
  }
}

TEST_CASE("a task of the caller's own sets the vocabulary and positions and is trained and evaluated", "[training]") {
  TrainSettings s = default_settings();
  s.model.d_model = 16;
  s.model.n_heads = 2;
  s.model.n_layers = 1;
  s.model.d_ff = 32;
  s.model.arch = Arch::decoder;
  s.heldout = 2;
  s.steps = 3;
  s.batch_size = 4;
  ParityTask parity;
  finalize(s, parity);
  CHECK(s.model.vocab_size == kNumSpecial + 2);
  CHECK(s.model.max_len == 64);  // max(64, 2 x (3 + 1 + 2))
  TrainState state(s, std::make_unique<ParityTask>());
  CHECK(state.heldout().size() == 2);
  const TrainOutcome out = Trainer(state, {}).run();
  CHECK(out.end == TrainEnd::finished);
  CHECK(out.heldout.accuracy.sequences == 2);
}

TEST_CASE("with grad_accum 3 a step's loss and gradients are the whole batch's, to float rounding, and the "
          "micro-batches' gradients are summed from zero", "[training][accumulation]") {
  // Without dropout the K micro-batches, weighed by their share of the targets, are the
  // whole batch's mean loss: a dropped micro-batch or an unweighted sum is off by a third.
  // Sequences of one length give every micro-batch the same share: variable lengths are
  // what tell a weighting by target tokens from one by micro-batches.
  const bool variable_length = GENERATE(false, true);
  TrainSettings whole_settings = tiny(1);
  if (variable_length) {
    whole_settings.task.min_len = 1;
    whole_settings.task.max_len = 8;
  }
  whole_settings.clip = 0;
  TrainSettings split_settings = whole_settings;
  split_settings.grad_accum = 3;
  TrainState whole(whole_settings), split(split_settings);
  std::map<std::string, std::vector<Real>> whole_grads, split_grads;
  StepHooks record_whole, record_split;
  record_whole.after_backward = [&](TrainState& st, double&) {
    for (const auto& [name, v] : st.model().named_parameters())
      whole_grads[name] = std::vector<Real>(v.grad().data(), v.grad().data() + v.numel());
  };
  record_split.after_backward = [&](TrainState& st, double&) {
    for (const auto& [name, v] : st.model().named_parameters())
      split_grads[name] = std::vector<Real>(v.grad().data(), v.grad().data() + v.numel());
  };
  // Stale gradients left in the buffers must not leak into the sum.
  for (Var v : split.parameters()) {
    v.grad() = Tensor(v.shape());
    v.grad().flat().setConstant(Real(7));
  }
  const StepResult a = train_step(whole, record_whole), b = train_step(split, record_split);
  CHECK(b.loss == Approx(a.loss).epsilon(1e-5));
  // tokens counts padded positions: each micro-batch is padded to its own longest sequence.
  if (variable_length) CHECK(b.tokens < a.tokens);
  else CHECK(b.tokens == a.tokens);
  CHECK(b.accuracy.token == Approx(a.accuracy.token));
  REQUIRE(whole_grads.size() == split_grads.size());
  double largest = 0, worst = 0;
  for (const auto& [name, g] : whole_grads)
    for (size_t i = 0; i < g.size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(g[i])));
      worst = std::max(worst, std::abs(static_cast<double>(g[i]) - static_cast<double>(split_grads[name][i])));
    }
  INFO("largest gradient " << largest << ", largest difference " << worst);
  CHECK(worst <= 1e-5 * largest);
}

TEST_CASE("an empty held-out set scores zero, not a solved task", "[training][evaluate]") {
  // A library caller may pass no examples: an exact match of 1 would count as reaching any target.
  TrainState state(tiny(1));
  const Accuracy greedy = greedy_accuracy(state.model(), {}, 256);
  CHECK(greedy.sequences == 0);
  CHECK(greedy.token == 0);
  CHECK(greedy.exact == 0);
  const LmScore lm = lm_totals({});
  CHECK(lm.tokens == 0);
  CHECK(lm.loss == 0);
  CHECK(lm.token == 0);
}

TEST_CASE("record_target solves at the first of K consecutive evaluations reaching the target, and a checkpoint "
          "carries the streak",
          "[training][target]") {
  TrainSettings s = tiny(8);
  s.target = 1;
  s.target_patience = 3;
  TrainState state(s);
  // (step, reached): a reach that is lost, then three in a row from step 30.
  CHECK_FALSE(state.record_target(10, true));
  CHECK_FALSE(state.record_target(20, false));
  CHECK(state.target_streak == 0);
  CHECK_FALSE(state.record_target(30, true));
  CHECK_FALSE(state.record_target(40, true));
  CHECK(state.solved_at == -1);
  CHECK(state.target_first_reached_at == 10);

  // Checkpointed mid-streak, restored into a fresh state: the third evaluation solves it there too.
  TempDir dir("training-target");
  const CheckpointStore store(dir / "checkpoints");
  fs::create_directories(store.dir());
  state.step = 40;
  store.save(state, 0, 1);
  TrainState resumed(s);
  store.restore(resumed, 40);
  CHECK(resumed.target_streak == 2);
  CHECK(resumed.target_streak_start == 30);
  CHECK(resumed.target_first_reached_at == 10);
  for (TrainState* st : {&state, &resumed}) {
    CHECK(st->record_target(50, true));
    CHECK(st->solved_at == 30);
    CHECK_FALSE(st->record_target(60, true));  // solved once: a later evaluation does not solve it again
    CHECK(st->solved_at == 30);
  }
}

TEST_CASE("a checkpoint is complete with both its files, and remove_after removes every checkpoint file of a later "
          "step and nothing else",
          "[training][resume]") {
  TempDir dir("training-store-files");
  const CheckpointStore store(dir / "checkpoints");
  fs::create_directories(store.dir());
  const auto touch = [&](const std::string& name) { std::ofstream(store.dir() + "/" + name) << "x"; };
  for (const char* name : {"step-00000010.safetensors", "step-00000010.optim.safetensors",
                           "step-00000020.safetensors",         // a model file without its optimizer file
                           "step-00000030.optim.safetensors",   // an optimizer file without its model file
                           "step-00000040.safetensors.partial", "notes-step-00000050.safetensors", "readme.txt"})
    touch(name);
  CHECK(store.steps() == std::vector<int64_t>{10});
  store.remove_after(10);
  std::set<std::string> left;
  for (const auto& entry : fs::directory_iterator(store.dir())) left.insert(entry.path().filename().string());
  CHECK(left == std::set<std::string>{"step-00000010.safetensors", "step-00000010.optim.safetensors",
                                      "step-00000040.safetensors.partial", "notes-step-00000050.safetensors",
                                      "readme.txt"});
}
