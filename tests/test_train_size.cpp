// A fixed training set (--train-size, datasets/train_set.h): which examples it
// holds, the batches that walk through it, full-batch steps, resuming, and
// the refusals of sizes it cannot hold.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <set>

#include "datasets/train_set.h"
#include "framework/error.h"
#include "framework/ops/loss.h"
#include "tests/cli_harness.h"
#include "tests/tiny_training.h"
#include "training/trainer.h"

using namespace attnlab;
using attnlab::testing::checkpoint_difference;
using attnlab::testing::metrics_without_times;
using attnlab::testing::TempDir;

namespace {

// tests/tiny_training.h's setting (256 distinct inputs), seed 7.
TrainSettings tiny(int64_t train_size, int64_t batch_size) {
  TrainSettings s = attnlab::testing::tiny_reverse_settings();
  s.train_size = train_size;
  s.batch_size = batch_size;
  s.seed = 7;
  s.steps = 8;
  s.eval_every = 4;
  s.log_every = 2;
  s.target = 0;
  finalize(s);
  return s;
}

std::vector<std::vector<int32_t>> inputs_of(const std::vector<Example>& examples) {
  std::vector<std::vector<int32_t>> out;
  for (const Example& e : examples) out.push_back(e.input);
  return out;
}

// Examples whose input is the single token `i`, i = 0 .. n - 1.
std::vector<Example> numbered(int64_t n) {
  std::vector<Example> out;
  for (int32_t i = 0; i < n; ++i) out.push_back({{i}, {i}});
  return out;
}

std::vector<int32_t> firsts(const std::vector<Example>& examples) {
  std::vector<int32_t> out;
  for (const Example& e : examples) out.push_back(e.input[0]);
  return out;
}

// The documented order of epoch e: Fisher-Yates over 0 .. n-1 with Rng(derive_seed(seed, e)).
std::vector<int32_t> fisher_yates(int64_t n, uint64_t seed, uint64_t e) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(derive_seed(seed, e));
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.integer(0, i))]);
  return order;
}

// The loss of `state`'s model on `examples` as one batch: what a full-batch step computes first.
double loss_on(const TrainState& state, const std::vector<Example>& examples) {
  const FormattedBatch batch = format_batch(state.batch_format(), to_pairs(examples));
  CrossEntropyOptions ce;
  ce.ignore_index = kIgnoreTarget;
  return static_cast<double>(cross_entropy(state.model().forward(batch.input), batch.targets, ce).item());
}

// copy over 2 symbols, length 1: 2 distinct inputs.
TaskConfig testing_copy_of_two() {
  TaskConfig c;
  c.name = "copy";
  c.vocab = 2;
  c.min_len = c.max_len = 1;
  return c;
}

}  // namespace

TEST_CASE("a --train-size set is the stream's first N distinct inputs, none held out, the same for the same seed",
          "[train_size]") {
  const TrainSettings s = tiny(64, 16);
  TrainState state(s);
  REQUIRE(state.train_set() != nullptr);
  const std::vector<Example>& set = state.train_set()->examples();
  // Independently: the held-out set and the stream as TrainState seeds them, duplicates dropped by hand.
  const auto task = make_task(s.task);
  const HeldOut held = make_heldout(*task, s.heldout, derive_seed(s.seed, kHeldoutStream));
  TrainStream stream(*task, held, derive_seed(s.seed, kTrainStream));
  std::set<std::vector<int32_t>> seen;
  std::vector<Example> expected;
  while (expected.size() < 64) {
    Example e = stream.next();
    if (seen.insert(e.input).second) expected.push_back(e);
  }
  CHECK(inputs_of(set) == inputs_of(expected));
  for (size_t i = 0; i < set.size(); ++i) CHECK(set[i].output == expected[i].output);
  for (const Example& e : set) CHECK_FALSE(held.contains(e.input));
  for (const Example& e : state.heldout()) CHECK(seen.count(e.input) == 0);
  CHECK(inputs_of(TrainState(s).train_set()->examples()) == inputs_of(set));
  TrainSettings other = s;
  other.seed = 8;
  CHECK(inputs_of(TrainState(other).train_set()->examples()) != inputs_of(set));
}

TEST_CASE("full batch: every step trains on the whole set in its draw order, unshuffled", "[train_size]") {
  TrainState state(tiny(32, 32));
  REQUIRE(state.train_set() != nullptr);
  CHECK_FALSE(state.train_set()->shuffled());
  const std::vector<Example> set = state.train_set()->examples();
  for (int64_t k = 1; k <= 4; ++k) {
    const double expected = loss_on(state, set);  // bitwise: the same examples, in the same order
    const StepResult r = train_step(state);
    CHECK(r.loss == expected);
    CHECK(state.train_set()->taken() == 32 * k);
    CHECK(state.train_set()->epoch() == k);
  }
  CHECK(state.data_state() == "set 128");
}

TEST_CASE("full batch with --grad-accum 2 and 2 threads: each step is the whole set once, split", "[train_size]") {
  TrainSettings s = tiny(32, 32);
  s.grad_accum = 2;
  s.threads = 2;
  TrainState state(s);
  for (int64_t k = 1; k <= 3; ++k) {
    const double expected = loss_on(state, state.train_set()->examples());
    const StepResult r = train_step(state);
    CHECK(r.loss == Approx(expected).epsilon(1e-6));  // the two halves' weighed losses, summed
    CHECK(state.train_set()->taken() == 32 * k);
  }
}

TEST_CASE("minibatches walk the set epoch after epoch, each epoch a fresh seeded permutation", "[train_size]") {
  TrainSet set(numbered(12), 5, true);
  std::vector<int32_t> walked;
  for (int k = 0; k < 5; ++k) {  // batches of 5 straddle the epochs' ends
    const std::vector<int32_t> batch = firsts(set.next_batch(5));
    walked.insert(walked.end(), batch.begin(), batch.end());
  }
  std::vector<int32_t> expected = fisher_yates(12, 5, 0);
  for (uint64_t e : {1, 2}) {
    const std::vector<int32_t> next = fisher_yates(12, 5, e);
    expected.insert(expected.end(), next.begin(), next.end());
  }
  expected.resize(25);
  CHECK(walked == expected);
  CHECK(fisher_yates(12, 5, 0) != fisher_yates(12, 5, 1));
  CHECK(set.taken() == 25);
  CHECK(set.epoch() == 2);
  TrainSet fixed(numbered(4), 5, false);
  CHECK(firsts(fixed.next_batch(6)) == std::vector<int32_t>{0, 1, 2, 3, 0, 1});
  CHECK(TrainState(tiny(32, 8)).train_set()->shuffled());
}

TEST_CASE("a training set's state resumes the walk exactly and a malformed one is refused", "[train_size]") {
  TrainSet a(numbered(12), 9, true);
  a.next_batch(7);
  TrainSet b(numbered(12), 9, true);
  b.set_state(a.state());
  CHECK(a.state() == "set 7");
  CHECK(firsts(b.next_batch(10)) == firsts(a.next_batch(10)));
  for (const char* bad : {"set -1", "set", "7 0 123", "set 3 4", "sets 3"}) {
    INFO(bad);
    CHECK_THROWS_WITH(b.set_state(bad), "malformed training-set state");
  }
  CHECK(b.taken() == 17);
  CHECK_THROWS_WITH(TrainSet({}, 1, false), "a training set needs at least one example");
}

TEST_CASE("an interrupted --train-size run resumed from its checkpoint is bitwise the uninterrupted run",
          "[train_size][resume]") {
  TempDir dir("train-size-resume");
  for (const int64_t batch : {6, 16}) {  // minibatches straddling epochs; the whole set
    INFO("batch " << batch);
    const TrainSettings s = tiny(16, batch);
    const std::string whole = dir / ("whole" + std::to_string(batch)), split = dir / ("split" + std::to_string(batch));
    {
      TrainState state(s);
      TrainerOptions o;
      o.run_dir = whole;
      REQUIRE(Trainer(state, o).run().end == TrainEnd::finished);
    }
    {
      TrainState state(s);
      TrainerOptions o;
      o.run_dir = split;
      o.stop_requested = [&state] { return state.step == 6; };  // mid-epoch for batches of 6
      REQUIRE(Trainer(state, o).run().end == TrainEnd::interrupted);
    }
    TrainState resumed(s);
    TrainerOptions o;
    o.run_dir = split;
    o.resume = true;
    Trainer trainer(resumed, o);
    CHECK(resumed.data_state() == "set " + std::to_string(6 * batch));
    REQUIRE(trainer.run().end == TrainEnd::finished);
    const std::string a = CheckpointStore(whole + "/checkpoints").stem(8), b = CheckpointStore(split + "/checkpoints").stem(8);
    CHECK(checkpoint_difference(model_path(a), model_path(b)) == "");
    CHECK(checkpoint_difference(optimizer_path(a), optimizer_path(b)) == "");
    CHECK(metrics_without_times(whole + "/metrics.csv") == metrics_without_times(split + "/metrics.csv"));
    CHECK(read_checkpoint_metadata(b).at("data_stream") == "set " + std::to_string(8 * batch));
  }
}

TEST_CASE("without --train-size the batches are the stream's, bit for bit, and the checkpoint keeps its state",
          "[train_size]") {
  const TrainSettings s = tiny(0, 6);
  TrainState state(s);
  CHECK(state.train_set() == nullptr);
  const auto task = make_task(s.task);
  const HeldOut held = make_heldout(*task, s.heldout, derive_seed(s.seed, kHeldoutStream));
  TrainStream stream(*task, held, derive_seed(s.seed, kTrainStream));
  for (int k = 0; k < 3; ++k) {
    CHECK(inputs_of(state.next_batch()) == inputs_of(stream.next_batch(6)));
    CHECK(state.data_state() == stream.state());
  }
}

TEST_CASE("train-size refusals: a set the task cannot hold, a batch larger than the set", "[train_size]") {
  TrainSettings s = tiny(0, 6);
  s.train_size = 237;  // 256 inputs, 20 held out: 236 left
  CHECK_THROWS_WITH(check_heldout(s), "--train-size 237 is more than the 236 distinct inputs of task 'reverse' left "
                                      "after the 20 held out (of 256); lower --train-size to at most 236 or widen the task");
  CHECK_THROWS_WITH(TrainState(s), Catch::Contains("--train-size 237 is more than the 236"));
  s.train_size = 236;
  CHECK_NOTHROW(check_heldout(s));
  TrainState all(s);  // every input the held-out set leaves
  CHECK(all.train_set()->size() == 236);
  s.train_size = 4;
  CHECK_THROWS_WITH(finalize(s), "--batch-size 6 is larger than --train-size 4: a batch would hold an example twice; "
                                 "use at most 4 (that: the whole set every step)");
  s.train_size = -1;
  CHECK_THROWS_WITH(finalize(s), "--train-size must be >= 0, got -1");
}

TEST_CASE("a training set whose distinct inputs are not found within 100 n + 100000 draws is refused", "[train_size]") {
  const auto task = make_task(testing_copy_of_two());
  const HeldOut none = make_heldout(*task, 0, 1);
  TrainStream stream(*task, none, 2);
  CHECK_THROWS_WITH(draw_distinct(stream, 3, task->name()),
                    "training set: found only 2 distinct copy inputs of the 3 requested after 100300 draws; ask for fewer");
  CHECK(stream.drawn() == 100300);
  CHECK(draw_distinct(stream, 2, task->name()).size() == 2);
  CHECK_THROWS_WITH(draw_distinct(stream, 0, task->name()), "training set size 0 is invalid; expected >= 1");
}
