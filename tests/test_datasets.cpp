// The task suite: outputs checked by an independent computation on the text
// form, lengths, determinism, held-out/training disjointness, text round trip
// and the error messages a user sees.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "datasets/splits.h"
#include "datasets/task.h"
#include "datasets/vocab.h"
#include "framework/error.h"
#include "tests/fixtures.h"

using namespace attnlab;

namespace {

TaskConfig config(const std::string& name, int64_t vocab, int64_t min_len, int64_t max_len) {
  return testing::task_config(name, vocab, min_len, max_len);
}

// The numbers of a numbered-vocabulary text such as "3 1 14".
std::vector<long> numbers(const std::string& text) {
  std::istringstream in(text);
  std::vector<long> out;
  long x;
  while (in >> x) out.push_back(x);
  return out;
}

// Runs `check(input numbers, output numbers)` on many sampled examples and
// verifies lengths and token ranges on the way.
template <class Check>
void check_numbered_task(const std::string& name, Check check) {
  const auto task = make_task(config(name, 7, 3, 12));
  Rng rng(42);
  std::set<int64_t> lengths_seen;
  for (int i = 0; i < 2000; ++i) {
    const Example ex = task->sample(rng);
    REQUIRE(static_cast<int64_t>(ex.input.size()) >= 3);
    REQUIRE(static_cast<int64_t>(ex.input.size()) <= 12);
    REQUIRE(static_cast<int64_t>(ex.output.size()) <= task->max_output_len());
    lengths_seen.insert(static_cast<int64_t>(ex.input.size()));
    for (int32_t t : ex.input) REQUIRE((t >= kNumSpecial && t < task->vocab_size()));
    const auto in = numbers(task->to_text(ex.input));
    const auto out = numbers(task->to_text(ex.output));
    REQUIRE(in.size() == ex.input.size());
    for (long x : in) REQUIRE((x >= 0 && x < 7));
    check(in, out);
  }
  CHECK(lengths_seen.size() == 10);  // every length in [3, 12] occurs in 2000 draws
}

}  // namespace

TEST_CASE("copy outputs equal their inputs on sampled examples", "[datasets]") {
  check_numbered_task("copy", [](const std::vector<long>& in, const std::vector<long>& out) { REQUIRE(out == in); });
}

TEST_CASE("reverse outputs are std::reverse of their inputs", "[datasets]") {
  check_numbered_task("reverse", [](std::vector<long> in, const std::vector<long>& out) {
    std::reverse(in.begin(), in.end());
    REQUIRE(out == in);
  });
}

TEST_CASE("sort outputs are std::sort of their inputs, ascending as numbers", "[datasets]") {
  check_numbered_task("sort", [](std::vector<long> in, const std::vector<long>& out) {
    std::sort(in.begin(), in.end());
    REQUIRE(out == in);
  });
  // Ascending as numbers, not as strings: "10" sorts after "9".
  const auto task = make_task(config("sort", 12, 1, 4));
  CHECK(task->to_text(task->solve(task->from_text("10 9 2 11"))) == "2 9 10 11");
}

TEST_CASE("duplicate outputs are the input twice, twice as long", "[datasets]") {
  check_numbered_task("duplicate", [](const std::vector<long>& in, const std::vector<long>& out) {
    std::vector<long> twice = in;
    twice.insert(twice.end(), in.begin(), in.end());
    REQUIRE(out == twice);
  });
  const auto task = make_task(config("duplicate", 7, 3, 12));
  CHECK(task->max_input_len() == 12);
  CHECK(task->max_output_len() == 24);
}

TEST_CASE("add outputs are the integer sum of the operands, zero-padded to digits+1", "[datasets]") {
  TaskConfig c;
  c.name = "add";
  c.digits = 4;
  c.vocab = 99;  // ignored by add
  const auto task = make_task(c);
  CHECK(task->vocab_size() == 15);  // 4 specials + 10 digits + '+'
  CHECK(task->max_input_len() == 9);
  CHECK(task->max_output_len() == 5);
  Rng rng(7);
  bool saw_carry_out = false, saw_leading_zero = false;
  for (int i = 0; i < 3000; ++i) {
    const Example ex = task->sample(rng);
    const std::string in = task->to_text(ex.input), out = task->to_text(ex.output);
    REQUIRE(in.size() == 9);
    REQUIRE(in[4] == '+');
    REQUIRE(out.size() == 5);
    const long a = std::stol(in.substr(0, 4)), b = std::stol(in.substr(5));
    REQUIRE(std::stol(out) == a + b);
    saw_carry_out = saw_carry_out || out[0] == '1';
    saw_leading_zero = saw_leading_zero || in[0] == '0';
  }
  CHECK(saw_carry_out);
  CHECK(saw_leading_zero);
  // Operands of other lengths are answered too (length generalisation, predict).
  CHECK(task->to_text(task->solve(task->from_text("999+1"))) == "1000");
  CHECK(task->to_text(task->solve(task->from_text("12345678901234567890+1"))) == "012345678901234567891");
}

TEST_CASE("add rejects malformed inputs with a message naming them", "[datasets]") {
  TaskConfig c;
  c.name = "add";
  const auto task = make_task(c);
  CHECK_THROWS_WITH(task->solve(task->from_text("12")), Catch::Contains("exactly one '+'") && Catch::Contains("12"));
  CHECK_THROWS_WITH(task->solve(task->from_text("1+2+3")), Catch::Contains("exactly one '+'"));
  CHECK_THROWS_WITH(task->solve(task->from_text("+5")), Catch::Contains("at least one digit"));
  CHECK_THROWS_AS(task->solve({kBos, 4, 14, 5}), ValueError);
}

TEST_CASE("sequence tasks reject special tokens and empty inputs in solve", "[datasets]") {
  const auto task = make_task(config("reverse", 5, 2, 4));
  CHECK_THROWS_WITH(task->solve({}), Catch::Contains("empty"));
  CHECK_THROWS_WITH(task->solve({5, kEos}), Catch::Contains("id 2"));
  CHECK_THROWS_WITH(task->solve({5, 9}), Catch::Contains("id 9"));  // V = 9
}

TEST_CASE("vocab_size is 4 specials plus the task symbols", "[datasets]") {
  CHECK(make_task(config("copy", 16, 1, 4))->vocab_size() == 20);
  CHECK(make_task(config("sort", 2, 1, 4))->vocab_size() == 6);
  CHECK(kPad == 0);
  CHECK(kBos == 1);
  CHECK(kEos == 2);
  CHECK(kSep == 3);
}

TEST_CASE("every task: the same seed gives the same examples and a different seed different ones", "[datasets]") {
  for (const auto& name : task_names()) {
    TaskConfig c = config(name, 10, 4, 9);
    const auto task = make_task(c);
    Rng a(123), b(123), other(124);
    std::vector<Example> sa, sb, so;
    for (int i = 0; i < 50; ++i) {
      sa.push_back(task->sample(a));
      sb.push_back(task->sample(b));
      so.push_back(task->sample(other));
    }
    bool same = true, differ = false;
    for (int i = 0; i < 50; ++i) {
      same = same && sa[i].input == sb[i].input && sa[i].output == sb[i].output;
      differ = differ || sa[i].input != so[i].input;
    }
    INFO(name);
    CHECK(same);
    CHECK(differ);
  }
}

TEST_CASE("held-out and training streams are disjoint over thousands of draws", "[datasets]") {
  // A small space (3 + 9 + 27 + 81 = 120 inputs) so that training draws hit
  // held-out inputs often and the rejection is really exercised.
  const auto task = make_task(config("reverse", 3, 1, 4));
  REQUIRE(task->input_space_size() == 120);
  const HeldOut heldout = make_heldout(*task, 40, derive_seed(5, kHeldoutStream));
  REQUIRE(heldout.size() == 40);
  std::set<std::vector<int32_t>> distinct;
  for (const auto& ex : heldout.examples()) {
    distinct.insert(ex.input);
    REQUIRE(ex.output == task->solve(ex.input));
  }
  REQUIRE(distinct.size() == 40);  // held-out examples are distinct

  TrainStream train(*task, heldout, derive_seed(5, kTrainStream));
  std::set<std::vector<int32_t>> train_inputs;
  for (int i = 0; i < 5000; ++i) {
    const Example ex = train.next();
    REQUIRE(distinct.count(ex.input) == 0);
    REQUIRE(ex.output == task->solve(ex.input));
    train_inputs.insert(ex.input);
  }
  CHECK(train.drawn() == 5000);
  CHECK(train.rejected() > 0);            // the stream did meet held-out inputs and skipped them
  CHECK(train_inputs.size() == 120 - 40);  // and rejects nothing else: every other input occurs
}

TEST_CASE("held-out size is capped by the inputs that exist, a full set leaves nothing to train on", "[datasets]") {
  const auto task = make_task(config("copy", 2, 2, 2));  // 4 inputs
  const HeldOut all = make_heldout(*task, 100, 1);
  CHECK(all.size() == 4);
  CHECK(all.requested() == 100);
  CHECK_THROWS_WITH(TrainStream(*task, all, 2), Catch::Contains("all 4 possible copy inputs"));
  const HeldOut three = make_heldout(*task, 3, 1);
  TrainStream train(*task, three, 2);
  const Example only = train.next();
  for (int i = 0; i < 100; ++i) REQUIRE(train.next().input == only.input);  // the one input left
  CHECK_FALSE(three.contains(only.input));
  CHECK_THROWS_AS(make_heldout(*task, -1, 1), ValueError);
}

TEST_CASE("held-out sets are deterministic in their seed", "[datasets]") {
  const auto task = make_task(config("sort", 16, 5, 10));
  const HeldOut a = make_heldout(*task, 200, 9), b = make_heldout(*task, 200, 9), c = make_heldout(*task, 200, 10);
  REQUIRE(a.size() == 200);
  bool same = true, differ = false;
  for (int64_t i = 0; i < 200; ++i) {
    same = same && a.examples()[i].input == b.examples()[i].input;
    differ = differ || a.examples()[i].input != c.examples()[i].input;
  }
  CHECK(same);
  CHECK(differ);
  CHECK(derive_seed(9, kHeldoutStream) != derive_seed(9, kTrainStream));
  CHECK(derive_seed(9, kTrainStream) != derive_seed(10, kTrainStream));
}

TEST_CASE("a training stream resumes exactly from its saved state", "[datasets]") {
  const auto task = make_task(config("copy", 3, 1, 3));  // small: rejections happen
  const HeldOut heldout = make_heldout(*task, 10, 1);
  TrainStream a(*task, heldout, 2);
  for (int i = 0; i < 37; ++i) a.next();
  const std::string saved = a.state();
  TrainStream b(*task, heldout, 999);
  b.set_state(saved);
  CHECK(b.drawn() == a.drawn());
  CHECK(b.rejected() == a.rejected());
  for (int i = 0; i < 50; ++i) REQUIRE(a.next().input == b.next().input);
  CHECK_THROWS_AS(b.set_state("garbage"), ValueError);
}

TEST_CASE("with_length fixes the input length (digits for add) for length generalisation", "[datasets]") {
  const auto task = make_task(with_length(config("reverse", 8, 4, 8), 20));
  const HeldOut eval = make_heldout(*task, 30, 3);
  for (const auto& ex : eval.examples()) REQUIRE(ex.input.size() == 20);
  TaskConfig add;
  add.name = "add";
  const auto add6 = make_task(with_length(add, 6));
  Rng rng(1);
  CHECK(add6->sample(rng).input.size() == 13);  // 6 + '+' + 6
  CHECK_THROWS_AS(with_length(add, 0), ValueError);
}

TEST_CASE("text round trips for every task, and batches pair input with output", "[datasets]") {
  for (const auto& name : task_names()) {
    const auto task = make_task(config(name, 13, 1, 6));
    Rng rng(11);
    std::vector<Example> examples;
    for (int i = 0; i < 200; ++i) {
      const Example ex = task->sample(rng);
      REQUIRE(task->from_text(task->to_text(ex.input)) == ex.input);
      REQUIRE(task->from_text(task->to_text(ex.output)) == ex.output);
      examples.push_back(ex);
    }
    const auto pairs = to_pairs(examples);
    REQUIRE(pairs.size() == examples.size());
    CHECK(pairs[3].first == examples[3].input);
    CHECK(pairs[3].second == examples[3].output);
    CHECK_FALSE(task->describe().empty());
  }
  const auto rev = make_task(config("reverse", 16, 1, 6));
  CHECK(rev->from_text("3 1 14") == std::vector<int32_t>{7, 5, 18});
  CHECK(rev->to_text({kBos, 7, kSep, 5, kEos, kPad}) == "<bos> 3 <sep> 1 <eos> <pad>");
  CHECK(rev->from_text("  3\t1<eos> ") == std::vector<int32_t>{7, 5, kEos});
  Example ex{{7, 5, 8}, {8, 5, 7}};
  CHECK(example_text(*rev, ex) == "3 1 4 -> 4 1 3");
  TaskConfig c;
  c.name = "add";
  const auto add = make_task(c);
  CHECK(add->from_text("1 2 3 + 4 5 6") == add->from_text("123+456"));
  CHECK(example_text(*add, {add->from_text("123+456"), add->solve(add->from_text("123+456"))}) == "123+456 -> 0579");
}

TEST_CASE("an unknown symbol or id is an error that names it", "[datasets]") {
  const auto task = make_task(config("copy", 16, 1, 6));
  CHECK_THROWS_AS(task->from_text("3 16 1"), ValueError);
  CHECK_THROWS_WITH(task->from_text("3 16 1"), Catch::Contains("'16'") && Catch::Contains("0..15"));
  CHECK_THROWS_WITH(task->from_text("3 x"), Catch::Contains("'x'"));
  CHECK_THROWS_WITH(task->from_text("<eof>"), Catch::Contains("'<eof>'"));
  CHECK_THROWS_WITH(task->to_text({4, 20}), Catch::Contains("20"));
  TaskConfig c;
  c.name = "add";
  const auto add = make_task(c);
  CHECK_THROWS_WITH(add->from_text("12=3"), Catch::Contains("'='"));
}

TEST_CASE("task config validation names the bad field and value", "[datasets]") {
  CHECK_NOTHROW(TaskConfig{}.validate());
  TaskConfig c;
  c.name = "revers";
  CHECK_THROWS_AS(make_task(c), ValueError);
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("'revers'") && Catch::Contains("copy, reverse, sort, add, duplicate"));
  c = TaskConfig{};
  c.min_len = 9;
  c.max_len = 4;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("min_len = 9") && Catch::Contains("max_len = 4"));
  c = TaskConfig{};
  c.vocab = 1;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("vocab = 1"));
  c = TaskConfig{};
  c.min_len = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("min_len = 0"));
  c = TaskConfig{};
  c.digits = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("digits = 0"));
  c = TaskConfig{};
  c.max_len = 2000000;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("max_len = 2000000"));
  CHECK(task_names() == std::vector<std::string>{"copy", "reverse", "sort", "add", "duplicate"});
}

TEST_CASE("input space sizes count the distinct inputs and saturate", "[datasets]") {
  CHECK(make_task(config("copy", 2, 2, 2))->input_space_size() == 4);
  CHECK(make_task(config("copy", 10, 1, 3))->input_space_size() == 1110);
  CHECK(make_task(config("copy", 16, 16, 16))->input_space_size() == std::numeric_limits<int64_t>::max());
  TaskConfig c;
  c.name = "add";
  c.digits = 2;
  CHECK(make_task(c)->input_space_size() == 10000);
}
