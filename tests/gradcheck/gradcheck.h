#pragma once
// The gradient checks of the test suite: attnlab::gradcheck (framework/gradcheck.h,
// public API) with a Catch2 assertion on top. These tests run against the
// float64 build of the engine, so the defaults are the tight ones stated
// there: step 1e-6, relative tolerance 1e-6, absolute floor 1e-8.
#include <catch2/catch.hpp>

#include "framework/gradcheck.h"
#include "framework/ops/ops.h"

namespace attnlab::testing {

using attnlab::gradcheck;
using attnlab::GradcheckOptions;
using attnlab::GradcheckResult;
using GradFn = attnlab::GradcheckFn;

inline Tensor random_tensor(Shape shape, Rng& rng, double lo = -1.0, double hi = 1.0) {
  return uniform_tensor(std::move(shape), rng, lo, hi);
}

// Catch2 assertion with the worst element in the failure message.
#define ATTNLAB_REQUIRE_GRADCHECK(result)            \
  do {                                               \
    auto gc_result_ = (result);                      \
    INFO(gc_result_.message());                      \
    REQUIRE(gc_result_.ok);                          \
  } while (0)

}  // namespace attnlab::testing
