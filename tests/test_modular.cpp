// The modular task (datasets/modular.cpp): every pair's answer against an
// independent computation, the split (disjoint, together all pairs, its
// count, its seed), full-batch steps over its training set, and the refusals.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <sstream>
#include <utility>

#include "datasets/task.h"
#include "framework/error.h"
#include "framework/ops/loss.h"
#include "tests/tiny_training.h"
#include "training/trainer.h"

using namespace attnlab;

namespace {

TaskConfig modular(ModularOp op, int64_t p, double fraction = 0.3, uint64_t seed = 0) {
  TaskConfig c;
  c.name = "modular";
  c.operation = op;
  c.modulus = p;
  c.train_fraction = fraction;
  c.seed = seed;
  return c;
}

// The expected answer computed without the task's formula: div by searching
// for the c with c b = a (mod p), the others by repeated addition.
int64_t independent(ModularOp op, int64_t a, int64_t b, int64_t p) {
  auto times = [p](int64_t x, int64_t y) {
    int64_t s = 0;
    for (int64_t i = 0; i < y; ++i) s = (s + x) % p;
    return s;
  };
  switch (op) {
    case ModularOp::add: return (a + b) % p;
    case ModularOp::sub: return (a + p - b) % p;
    case ModularOp::mul: return times(a, b);
    case ModularOp::sq: return (times(a, a) + times(b, b)) % p;
    case ModularOp::div:
      for (int64_t c = 0; c < p; ++c)
        if (times(c, b) == a) return c;
  }
  return -1;
}

// An example's text "a op b =" -> (a, op, b, =) and its answer, read back as numbers.
struct Read {
  int64_t a = -1, b = -1, c = -1;
  std::string op, equals;
};
Read read(const Task& task, const Example& e) {
  Read r;
  std::istringstream in(task.to_text(e.input));
  in >> r.a >> r.op >> r.b >> r.equals;
  r.c = std::stoll(task.to_text(e.output));
  return r;
}

std::set<std::pair<int64_t, int64_t>> operands(const Task& task, const std::vector<Example>& examples) {
  std::set<std::pair<int64_t, int64_t>> out;
  for (const Example& e : examples) out.insert({read(task, e).a, read(task, e).b});
  return out;
}

}  // namespace

TEST_CASE("modular: every pair's answer equals an independent computation, for each operation", "[datasets][modular]") {
  const std::pair<ModularOp, std::string> ops[] = {
      {ModularOp::add, "+"}, {ModularOp::sub, "-"}, {ModularOp::mul, "*"}, {ModularOp::div, "/"}, {ModularOp::sq, "sq"}};
  for (int64_t p : {2, 7, 11}) {
    for (const auto& [op, token] : ops) {
      INFO("p = " << p << ", op " << token);
      const auto task = make_task(modular(op, p));
      CHECK(task->vocab_size() == p + 6);  // 4 specials, p residues, the operator, "="
      std::vector<Example> all = *task->own_train();
      all.insert(all.end(), task->own_heldout()->begin(), task->own_heldout()->end());
      for (const Example& e : all) {
        REQUIRE(e.input.size() == 4);
        REQUIRE(e.output.size() == 1);
        const Read r = read(*task, e);
        REQUIRE(r.op == token);
        REQUIRE(r.equals == "=");
        REQUIRE(r.c == independent(op, r.a, r.b, p));
        REQUIRE(task->solve(e.input) == e.output);
      }
    }
  }
  const auto div = make_task(modular(ModularOp::div, 7));
  CHECK(div->to_text(div->solve(div->from_text("3 / 5 ="))) == "2");  // 2 x 5 = 10 = 3 mod 7
}

TEST_CASE("modular: training and held-out sets are disjoint and together every pair, round(f x pairs) in training",
          "[datasets][modular]") {
  for (ModularOp op : {ModularOp::add, ModularOp::div}) {
    for (double f : {0.05, 0.3, 0.5, 0.9}) {
      const int64_t p = 13, pairs = op == ModularOp::div ? p * (p - 1) : p * p;
      INFO("op " << name_of(op) << ", fraction " << f);
      const auto task = make_task(modular(op, p, f));
      const auto train = operands(*task, *task->own_train()), held = operands(*task, *task->own_heldout());
      CHECK(static_cast<int64_t>(task->own_train()->size()) == std::llround(f * static_cast<double>(pairs)));
      CHECK(train.size() == task->own_train()->size());  // no pair twice
      CHECK(held.size() == task->own_heldout()->size());
      std::set<std::pair<int64_t, int64_t>> both = train;
      both.insert(held.begin(), held.end());
      CHECK(both.size() == train.size() + held.size());  // disjoint
      CHECK(static_cast<int64_t>(both.size()) == pairs);  // and every pair
      for (const auto& [a, b] : both) CHECK((a >= 0 && a < p && b >= (op == ModularOp::div ? 1 : 0) && b < p));
    }
  }
  CHECK(make_task(modular(ModularOp::add, 7))->own_train()->size() == 15);  // round(0.3 x 49 = 14.7)
}

TEST_CASE("modular: the same seed gives the same split, another seed another", "[datasets][modular]") {
  const auto a = make_task(modular(ModularOp::add, 11, 0.3, 5)), same = make_task(modular(ModularOp::add, 11, 0.3, 5));
  const auto other = make_task(modular(ModularOp::add, 11, 0.3, 6));
  auto inputs = [](const std::vector<Example>& examples) {
    std::vector<std::vector<int32_t>> out;
    for (const Example& e : examples) out.push_back(e.input);
    return out;
  };
  CHECK(inputs(*a->own_train()) == inputs(*same->own_train()));
  CHECK(inputs(*a->own_heldout()) == inputs(*same->own_heldout()));
  CHECK(operands(*a, *a->own_train()) != operands(*other, *other->own_train()));  // another set, not only another order
  Rng r1(3), r2(3);
  for (int i = 0; i < 20; ++i) CHECK(a->sample(r1).input == same->sample(r2).input);
}

TEST_CASE("modular: full batch trains on the whole training set, in one order, at every step", "[datasets][modular]") {
  TrainSettings s = attnlab::testing::tiny_reverse_settings();
  s.task = modular(ModularOp::add, 7);
  s.heldout = default_settings().heldout;  // modular holds out the rest; --heldout does not apply
  s.model.arch = Arch::decoder;
  s.batch_size = 15;
  s.target = 0;
  finalize(s);
  TrainState state(s);
  REQUIRE(state.train_set() != nullptr);
  CHECK_FALSE(state.train_set()->shuffled());
  CHECK(state.train_set()->examples().size() == 15);
  CHECK(state.heldout().size() == 34);  // the rest: 49 - 15
  const std::vector<Example> set = *state.task().own_train();
  for (int64_t k = 1; k <= 3; ++k) {
    const FormattedBatch batch = format_batch(state.batch_format(), to_pairs(set));
    CrossEntropyOptions ce;
    ce.ignore_index = kIgnoreTarget;
    const double expected = cross_entropy(state.model().forward(batch.input), batch.targets, ce).item();
    CHECK(train_step(state).loss == expected);  // bitwise: the same examples, in the same order
    CHECK(state.train_set()->taken() == 15 * k);
  }
  TrainSettings mini = s;
  mini.batch_size = 5;
  finalize(mini);
  CHECK(TrainState(mini).train_set()->shuffled());
}

TEST_CASE("modular: bad moduli, fractions, batch sizes and sets are refused naming the value", "[datasets][modular]") {
  const std::pair<TaskConfig, std::string> cases[] = {
      {modular(ModularOp::add, 1), "--modulus 1 is invalid; expected 2..1000"},
      {modular(ModularOp::add, 1001), "--modulus 1001 is invalid; expected 2..1000"},
      {modular(ModularOp::div, 12), "--operation div needs a prime --modulus (every b != 0 invertible), got 12, divisible by 2"},
      {modular(ModularOp::add, 7, 0), "--train-fraction 0 is invalid; expected 0 < f < 1"},
      {modular(ModularOp::add, 7, 1), "--train-fraction 1 is invalid; expected 0 < f < 1"},
      {modular(ModularOp::add, 7, NAN), "--train-fraction nan is invalid; expected 0 < f < 1"},
      {modular(ModularOp::add, 7, 0.005), "--train-fraction 0.005 of the 49 pairs of --modulus 7 is 0 training pairs; "
                                          "raise --train-fraction"},
      {modular(ModularOp::add, 7, 0.99), "--train-fraction 0.99 of the 49 pairs of --modulus 7 leaves no pair to hold "
                                         "out; lower --train-fraction"},
  };
  for (const auto& [config, message] : cases) {
    INFO(message);
    CHECK_THROWS_WITH(make_task(config), message);
  }
  CHECK_NOTHROW(make_task(modular(ModularOp::mul, 12)));  // only div needs a prime
  const auto task = make_task(modular(ModularOp::add, 7));
  CHECK_THROWS_WITH(task->solve(task->from_text("3 + 5")), "modular: the input '3 + 5' is not 'a + b =' with a, b in 0..6");

  TrainSettings s = attnlab::testing::tiny_reverse_settings();
  s.task = modular(ModularOp::add, 7);
  s.heldout = default_settings().heldout;
  s.batch_size = 16;
  CHECK_THROWS_WITH(finalize(s), "--batch-size 16 is larger than the 15 training pairs of task 'modular' "
                                 "(--train-fraction 0.3); use at most 15 (that: the whole set every step)");
  s.batch_size = 15;
  s.train_size = 10;
  CHECK_THROWS_WITH(check_heldout(s), "--train-size 10 does not apply to task 'modular': its training set is "
                                      "--train-fraction 0.3 of all pairs (15 pairs); set --train-fraction instead");
  s.train_size = 0;
  s.heldout = 20;
  CHECK_THROWS_WITH(check_heldout(s), "--heldout 20 does not apply to task 'modular': it holds out every pair not in "
                                      "its training set (34 pairs); leave --heldout out");
  s.heldout = default_settings().heldout;
  CHECK_NOTHROW(check_heldout(s));
}
