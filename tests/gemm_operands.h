#pragma once
// Random operands of one product for the gemm tests (test_gemm.cpp, test_gemm_bf16.cpp).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "framework/ops/gemm.h"
#include "framework/random.h"

namespace attnlab::testing {

struct GemmCase {
  int64_t m, n, k;
  bool ta = false, tb = false;
  int64_t pad = 0;  // extra elements per row of every operand (row stride = cols + pad)
};

// A stored matrix of random values in [-1, 1] with row stride cols + pad.
struct Stored {
  int64_t rows, cols, ld;
  std::vector<float> v;
  Stored(int64_t r, int64_t c, int64_t pad, Rng& rng) : rows(r), cols(c), ld(c + pad), v(size_t(r * (c + pad))) {
    for (float& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  }
  GemmOperand op(bool trans) const { return {v.data(), rows, cols, ld, trans}; }
  float at(int64_t i, int64_t j, bool trans) const { return trans ? v[size_t(j * ld + i)] : v[size_t(i * ld + j)]; }
};

// op(A) (m, k), op(B) (k, n) and C (m, n) of a case.
struct Operands {
  Stored a, b, c;
  Operands(const GemmCase& t, Rng& rng)
      : a(t.ta ? t.k : t.m, t.ta ? t.m : t.k, t.pad, rng),
        b(t.tb ? t.n : t.k, t.tb ? t.k : t.n, t.pad, rng),
        c(t.m, t.n, t.pad, rng) {}
  GemmOutput out() { return {c.v.data(), c.rows, c.cols, c.ld}; }
};

// Element (i, j) of (accumulate ? c_old : 0) + alpha op(A) op(B) computed in
// double, each operand element first mapped by `value` (e.g. rounded to bf16),
// and the bound on an fp32 product's error there: 2 (k + 2) eps (|alpha|
// sum |a b| + |c_old|), eps fp32's.
struct ExpectedElement {
  double value, bound;
};
template <class Value>
ExpectedElement expected_element(const GemmCase& t, const Operands& x, const std::vector<float>& c_old, float alpha,
                                 bool accumulate, int64_t i, int64_t j, Value value) {
  double sum = 0, mag = 0;
  for (int64_t p = 0; p < t.k; ++p) {
    const double term = value(x.a.at(i, p, t.ta)) * value(x.b.at(p, j, t.tb));
    sum += term;
    mag += std::abs(term);
  }
  const double old = accumulate ? double(c_old[size_t(i * x.c.ld + j)]) : 0.0;
  const double eps = std::numeric_limits<float>::epsilon();
  return {old + alpha * sum, 2.0 * double(t.k + 2) * eps * (std::abs(alpha) * mag + std::abs(old))};
}

}  // namespace attnlab::testing
