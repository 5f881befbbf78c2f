// MultiHeadAttention's fused projections in float64: against three separate
// linear ops (tests/fused_qkv_reference.h), and stacked_forward's gradients by
// finite differences. (The layer's own gradient checks, self, cross, causal,
// padded, d_k != d_v, rope and dropout, are in test_layers.cpp and run through
// the fused path too.)
#include "tests/gradcheck/gradcheck.h"

#include "framework/nn/nn.h"
#include "tests/fused_qkv_reference.h"

using namespace attnlab;
using namespace attnlab::testing;

TEST_CASE("fused Q, K, V projections equal three separate linear ops in float64: output and every gradient to 1e-12",
          "[gradcheck][attention][fused]") {
  // The same sums, only grouped into one product: equal to float64 rounding,
  // while a wrong column block, a swapped k and v or a lost bias is off by O(1).
  for (const FusedCase& c : fused_cases()) check_fused_against_unfused(c, 1e-12);
}

TEST_CASE("stacked_forward gradients w.r.t. input and every weight and bias, with and without bias",
          "[gradcheck][layers][fused]") {
  Rng init(41), data(42);
  for (bool bias : {true, false}) {
    INFO("bias: " << bias);
    Linear a(5, 4, init, bias), b(5, 3, init, bias), c(5, 2, init, bias);
    Var x(random_tensor({2, 3, 5}, data), true);
    std::vector<Var> inputs{x};
    for (const Linear* l : {&a, &b, &c})
      for (const Var& p : l->parameters()) inputs.push_back(p);
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
        [&](const std::vector<Var>& in) { return stacked_forward({&a, &b, &c}, in[0]); }, inputs));
  }
}
