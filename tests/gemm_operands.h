#pragma once
// Random operands of one product for the gemm tests (test_gemm.cpp, test_gemm_bf16.cpp).
#include <cstdint>
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

}  // namespace attnlab::testing
