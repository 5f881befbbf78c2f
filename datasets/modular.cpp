// modular: c = a op b mod p over every pair of residues a, b in [0, p) (for div
// every b != 0): p² pairs (div: p(p - 1)). A seeded shuffle of all of them,
// Rng(derive_seed(seed, kHeldoutStream)), puts the first round(f × pairs) in the
// training set (f = train_fraction) and the rest in the held-out set, both in
// that shuffled order: disjoint, and together every pair.
// Tokens: one per residue ("0".."p-1", ids 4..p+3), the operator's token (id
// p+4) and "=" (id p+5), V = p + 6. Input "a op b =", output the one residue c:
//   "3 + 5 =" -> "1"   (p = 7)
// The training set is walked by a TrainSet (own_train), so --batch-size equal
// to its size gives the whole set at every step (full batch).
#include <cmath>
#include <utility>

#include "datasets/more_tasks.h"
#include "datasets/splits.h"
#include "framework/error.h"

namespace attnlab {

const ChoiceNames<ModularOp>& choice_names(ModularOp) {
  static const ChoiceNames<ModularOp> names = {{ModularOp::add, "add", "a + b"},
                                               {ModularOp::sub, "sub", "a - b"},
                                               {ModularOp::mul, "mul", "a × b"},
                                               {ModularOp::div, "div", "a × b⁻¹, b ≠ 0, prime modulus"},
                                               {ModularOp::sq, "sq", "a² + b²"}};
  return names;
}

const char* operator_token(ModularOp op) {
  switch (op) {
    case ModularOp::add: return "+";
    case ModularOp::sub: return "-";
    case ModularOp::mul: return "*";
    case ModularOp::div: return "/";
    case ModularOp::sq: return "sq";
  }
  return "?";
}

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

namespace {

int64_t modular_power(int64_t base, int64_t exponent, int64_t p) {
  int64_t result = 1 % p;
  base %= p;
  for (; exponent > 0; exponent >>= 1, base = base * base % p)
    if (exponent & 1) result = result * base % p;
  return result;
}

// The least divisor > 1 of a composite n, to name it in a message.
int64_t modular_least_divisor(int64_t n) {
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return d;
  return n;
}

std::string fraction_text(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

int64_t modular_result(ModularOp op, int64_t a, int64_t b, int64_t p) {
  switch (op) {
    case ModularOp::add: return (a + b) % p;
    case ModularOp::sub: return ((a - b) % p + p) % p;
    case ModularOp::mul: return a * b % p;
    case ModularOp::div:
      if (b % p == 0 || !is_prime(p))
        throw ValueError("modular div: " + std::to_string(a) + " / " + std::to_string(b) + " mod " + std::to_string(p) +
                         " is undefined; expected b != 0 and a prime modulus");
      return a * modular_power(b, p - 2, p) % p;  // Fermat: b^(p-2) = b⁻¹ mod a prime p
    case ModularOp::sq: return (a * a + b * b) % p;
  }
  return 0;
}

int64_t modular_pair_count(const TaskConfig& c) {
  return c.operation == ModularOp::div ? c.modulus * (c.modulus - 1) : c.modulus * c.modulus;
}

int64_t modular_train_count(const TaskConfig& c) {
  return std::llround(c.train_fraction * static_cast<double>(modular_pair_count(c)));
}

void check_modular(const TaskConfig& c) {
  const std::string p = std::to_string(c.modulus);
  if (c.modulus < 2 || c.modulus > kMaxModulus)
    throw ValueError("--modulus " + p + " is invalid; expected 2.." + std::to_string(kMaxModulus));
  if (c.operation == ModularOp::div && !is_prime(c.modulus))
    throw ValueError("--operation div needs a prime --modulus (every b != 0 invertible), got " + p + ", divisible by " +
                     std::to_string(modular_least_divisor(c.modulus)));
  const std::string f = fraction_text(c.train_fraction);
  if (!(c.train_fraction > 0 && c.train_fraction < 1))
    throw ValueError("--train-fraction " + f + " is invalid; expected 0 < f < 1");
  const int64_t pairs = modular_pair_count(c), train = modular_train_count(c);
  const std::string of = "--train-fraction " + f + " of the " + std::to_string(pairs) + " pairs of --modulus " + p;
  if (train < 1) throw ValueError(of + " is 0 training pairs; raise --train-fraction");
  if (train >= pairs) throw ValueError(of + " leaves no pair to hold out; lower --train-fraction");
}

namespace {

class ModularTask : public Task {
 public:
  explicit ModularTask(const TaskConfig& config)
      : Task(config, Vocab::numbered(config.modulus, {operator_token(config.operation), "="})) {
    check_modular(config);
    const int64_t p = config.modulus, first_b = config.operation == ModularOp::div ? 1 : 0;
    std::vector<Example> all;
    all.reserve(static_cast<size_t>(modular_pair_count(config)));
    for (int64_t a = 0; a < p; ++a)
      for (int64_t b = first_b; b < p; ++b)
        all.push_back({{residue(a), op_id(), residue(b), equals_id()}, {residue(modular_result(config.operation, a, b, p))}});
    Rng rng(derive_seed(config.seed, kHeldoutStream));
    const auto n = static_cast<int64_t>(all.size());
    for (int64_t i = n - 1; i > 0; --i) std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(rng.integer(0, i))]);
    const auto train = static_cast<std::ptrdiff_t>(modular_train_count(config));
    train_.assign(std::make_move_iterator(all.begin()), std::make_move_iterator(all.begin() + train));
    heldout_.assign(std::make_move_iterator(all.begin() + train), std::make_move_iterator(all.end()));
  }

  std::string name() const override { return "modular"; }
  std::string describe() const override {
    const std::string p = std::to_string(config_.modulus), last = std::to_string(config_.modulus - 1);
    const std::string op = operator_token(config_.operation);
    return "modular: " + name_of(config_.operation) + ", input 'a " + op + " b =' for a, b in 0.." + last +
           (config_.operation == ModularOp::div ? " (b != 0)" : "") + ", output the residue mod " + p +
           "; training set " + std::to_string(train_.size()) + " of the " +
           std::to_string(train_.size() + heldout_.size()) + " pairs (--train-fraction " + fraction_text(config_.train_fraction) +
           ", seed " + std::to_string(config_.seed) + "), held out the other " + std::to_string(heldout_.size()) +
           ", V = " + std::to_string(vocab_size());
  }

  Example sample(Rng& rng) const override {
    return train_[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(train_.size()) - 1))];
  }
  std::vector<int32_t> sample_input(Rng& rng) const override { return sample(rng).input; }

  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    const auto is_residue = [&](int32_t t) { return t >= kNumSpecial && t < kNumSpecial + config_.modulus; };
    if (input.size() != 4 || !is_residue(input[0]) || input[1] != op_id() || !is_residue(input[2]) ||
        input[3] != equals_id())
      throw ValueError("modular: the input '" + safe_text(input) + "' is not 'a " + operator_token(config_.operation) +
                       " b =' with a, b in 0.." + std::to_string(config_.modulus - 1));
    const int64_t a = input[0] - kNumSpecial, b = input[2] - kNumSpecial;
    return {residue(modular_result(config_.operation, a, b, config_.modulus))};
  }

  int64_t min_input_len() const override { return 4; }
  int64_t max_input_len() const override { return 4; }
  int64_t max_output_len() const override { return 1; }
  int64_t input_space_size() const override { return static_cast<int64_t>(train_.size()); }  // what sample() draws
  const std::vector<Example>* own_heldout() const override { return &heldout_; }
  const std::vector<Example>* own_train() const override { return &train_; }

 private:
  static int32_t residue(int64_t r) { return Vocab::symbol_id(r); }
  int32_t op_id() const { return Vocab::symbol_id(config_.modulus); }
  int32_t equals_id() const { return Vocab::symbol_id(config_.modulus + 1); }
  // The text of an input for an error message, tolerating ids outside V.
  std::string safe_text(const std::vector<int32_t>& ids) const {
    std::string s;
    for (int32_t t : ids)
      s += (s.empty() ? "" : " ") + ((t >= 0 && t < vocab_size()) ? vocab_.token(t) : "<" + std::to_string(t) + "?>");
    return shortened(s);
  }

  std::vector<Example> train_, heldout_;
};

}  // namespace

std::unique_ptr<Task> make_modular_task(const TaskConfig& config) { return std::make_unique<ModularTask>(config); }

}  // namespace attnlab
