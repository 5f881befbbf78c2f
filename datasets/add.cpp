// add: input "a+b" with two operands of `digits` decimal digits each (every
// digit uniform, so leading zeros are allowed and a, b are uniform in
// [0, 10^digits)); output the digits of a + b, most significant first,
// zero-padded to digits + 1 digits so that the output length is fixed.
// Vocabulary: '0'..'9' (ids 4..13) and '+' (id 14), V = 15, whatever
// TaskConfig::vocab says; min_len/max_len are not used (the input length is
// always 2*digits + 1). Addition is digit by digit, so any `digits` works.
#include <algorithm>
#include <limits>

#include "datasets/sequence_task.h"
#include "framework/error.h"

namespace attnlab {

namespace {

constexpr int32_t kDigit0 = kNumSpecial;       // '0'
constexpr int32_t kPlus = kNumSpecial + 10;    // '+'

class AddTask : public Task {
 public:
  explicit AddTask(const TaskConfig& config) : Task(config, Vocab::characters("0123456789+")) {}

  std::string name() const override { return "add"; }
  std::string describe() const override {
    const std::string d = std::to_string(config_.digits);
    return "add: input a+b with " + d + "-digit operands (leading zeros allowed), output a+b as " +
           std::to_string(config_.digits + 1) + " digits; symbols 0-9 and +, V = " + std::to_string(vocab_size());
  }

  std::vector<int32_t> sample_input(Rng& rng) const override {
    const int64_t d = config_.digits;
    std::vector<int32_t> input(static_cast<size_t>(2 * d + 1));
    for (int64_t i = 0; i < 2 * d + 1; ++i)
      input[static_cast<size_t>(i)] = (i == d) ? kPlus : kDigit0 + static_cast<int32_t>(rng.integer(0, 9));
    return input;
  }

  // Operands of any lengths (>= 1 digit each); the output has
  // max(len a, len b) + 1 digits.
  std::vector<int32_t> solve(const std::vector<int32_t>& input) const override {
    const auto plus = std::find(input.begin(), input.end(), kPlus);
    if (plus == input.end() || std::find(plus + 1, input.end(), kPlus) != input.end())
      throw ValueError("add: the input '" + safe_text(input) + "' must contain exactly one '+'");
    const std::vector<int32_t> a(input.begin(), plus), b(plus + 1, input.end());
    if (a.empty() || b.empty())
      throw ValueError("add: the input '" + safe_text(input) + "' needs at least one digit on each side of '+'");
    for (int32_t t : input)
      if (t != kPlus && (t < kDigit0 || t > kDigit0 + 9))
        throw ValueError("add: the input '" + safe_text(input) + "' holds id " + std::to_string(t) +
                         ", expected digits and one '+'");
    const size_t n = std::max(a.size(), b.size()) + 1;
    std::vector<int32_t> out(n);
    int carry = 0;
    for (size_t k = 0; k < n; ++k) {  // k-th digit from the right
      int s = carry;
      if (k < a.size()) s += a[a.size() - 1 - k] - kDigit0;
      if (k < b.size()) s += b[b.size() - 1 - k] - kDigit0;
      out[n - 1 - k] = kDigit0 + s % 10;
      carry = s / 10;
    }
    return out;
  }

  int64_t min_input_len() const override { return 2 * config_.digits + 1; }
  int64_t max_input_len() const override { return 2 * config_.digits + 1; }
  int64_t max_output_len() const override { return config_.digits + 1; }
  int64_t input_space_size() const override {  // 10^(2 digits), saturating
    const int64_t big = std::numeric_limits<int64_t>::max();
    int64_t n = 1;
    for (int64_t i = 0; i < 2 * config_.digits; ++i) {
      if (n > big / 10) return big;
      n *= 10;
    }
    return n;
  }

 private:
  // The text of an input for an error message, tolerating ids outside V.
  std::string safe_text(const std::vector<int32_t>& ids) const {
    std::string s;
    for (int32_t t : ids) s += (t >= 0 && t < vocab_size()) ? vocab_.token(t) : "<" + std::to_string(t) + "?>";
    return shortened(s);
  }
};

}  // namespace

std::unique_ptr<Task> make_add_task(const TaskConfig& config) { return std::make_unique<AddTask>(config); }

}  // namespace attnlab
