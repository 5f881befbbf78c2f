// Finite-difference gradient checks of the data-movement ops (reshape,
// transpose, split, concat), the reductions (sum, mean), embedding and
// dropout (float64 engine).
// Tolerance: gradcheck.h's default (relative 1e-6, absolute floor 1e-8),
// orders of magnitude above float64 finite-difference noise (~1e-10) while a
// dropped or doubled term gives an error of order 1.
#include <vector>

#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;
using attnlab::testing::gradcheck;
using attnlab::testing::random_tensor;

namespace {
Var param(const Shape& shape, Rng& rng) { return Var(random_tensor(shape, rng), true); }
}  // namespace

TEST_CASE("reshape gradient matches finite differences", "[gradcheck][shape]") {
  Rng rng(31);
  struct Case {
    Shape from, to;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 4}, {4, -1}}, {{6}, {1, 6, 1}}, {{1}, {}}, {{3, 1, 2}, {-1}}}) {
    INFO("reshape " << shape_str(c.from) << " to " << shape_str(c.to));
    Var x = param(c.from, rng);
    Shape to = c.to;
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([to](const std::vector<Var>& in) { return reshape(in[0], to); }, {x}));
  }
}

TEST_CASE("transpose gradient matches finite differences for any pair of axes", "[gradcheck][shape]") {
  Rng rng(32);
  struct Case {
    Shape shape;
    int a0, a1;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 4}, 0, 2},
                                         {{2, 3, 4}, 1, 2},
                                         {{2, 3, 4}, 0, 1},
                                         {{2, 3, 4}, -1, -2},
                                         {{2, 3, 1, 4}, 1, 3},
                                         {{2, 3, 4, 2}, 2, 1},
                                         {{3, 5}, 0, 1},
                                         {{3, 5}, 1, 1}}) {
    INFO("transpose " << shape_str(c.shape) << " axes " << c.a0 << ", " << c.a1);
    Var x = param(c.shape, rng);
    int a0 = c.a0, a1 = c.a1;
    ATTNLAB_REQUIRE_GRADCHECK(
        gradcheck([a0, a1](const std::vector<Var>& in) { return transpose(in[0], a0, a1); }, {x}));
  }
}

TEST_CASE("split gradient matches finite differences for every piece", "[gradcheck][shape]") {
  Rng rng(33);
  struct Case {
    Shape shape;
    int axis;
    std::vector<int64_t> sizes;
  };
  for (const Case& c : std::vector<Case>{{{2, 5, 3}, 1, {1, 3, 1}},
                                         {{2, 5, 3}, -1, {2, 1}},
                                         {{2, 5, 3}, 0, {1, 1}},
                                         {{4, 3}, 0, {2, 0, 2}},
                                         {{6}, 0, {6}}}) {
    Var x = param(c.shape, rng);
    for (size_t piece = 0; piece < c.sizes.size(); ++piece) {
      if (c.sizes[piece] == 0) continue;  // an empty piece has nothing to check
      INFO("split " << shape_str(c.shape) << " axis " << c.axis << " piece " << piece);
      Case cc = c;
      ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
          [cc, piece](const std::vector<Var>& in) { return split(in[0], cc.axis, cc.sizes)[piece]; }, {x}));
    }
  }
}

TEST_CASE("concat gradient matches finite differences for every part", "[gradcheck][shape]") {
  Rng rng(34);
  Var a = param({2, 1, 3}, rng), b = param({2, 4, 3}, rng), c = param({2, 2, 3}, rng);
  ATTNLAB_REQUIRE_GRADCHECK(
      gradcheck([](const std::vector<Var>& in) { return concat({in[0], in[1], in[2]}, 1); }, {a, b, c}));
  Var d = param({1, 4, 3}, rng);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return concat({in[0], in[1]}, 0); }, {b, d}));
  Var e = param({2, 4, 1}, rng);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return concat({in[0], in[1]}, -1); }, {b, e}));
}

TEST_CASE("split then concat of scaled pieces differentiates each piece separately", "[gradcheck][shape]") {
  Rng rng(35);
  Var x = param({3, 6}, rng);
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
      [](const std::vector<Var>& in) {
        std::vector<Var> p = split(in[0], 1, {2, 3, 1});
        return concat({scale(p[2], 3.0), p[0], scale(p[1], -2.0)}, 1);
      },
      {x}));
}

TEST_CASE("sum and mean of all elements match finite differences", "[gradcheck][reduce]") {
  Rng rng(36);
  for (const Shape& shape : std::vector<Shape>{{1}, {5}, {2, 3, 4}, {1, 4, 1}}) {
    INFO("shape " << shape_str(shape));
    Var x = param(shape, rng);
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return sum(in[0]); }, {x}));
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck([](const std::vector<Var>& in) { return mean(in[0]); }, {x}));
  }
}

TEST_CASE("sum and mean along an axis match finite differences with and without keepdim", "[gradcheck][reduce]") {
  Rng rng(37);
  for (const Shape& shape : std::vector<Shape>{{5}, {2, 3, 4}, {1, 4, 1}, {3, 2}}) {
    Var x = param(shape, rng);
    const int rank = static_cast<int>(shape.size());
    for (int axis = -rank; axis < rank; ++axis)
      for (bool keepdim : {false, true}) {
        INFO("shape " << shape_str(shape) << " axis " << axis << " keepdim " << keepdim);
        ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
            [axis, keepdim](const std::vector<Var>& in) { return sum(in[0], axis, keepdim); }, {x}));
        ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
            [axis, keepdim](const std::vector<Var>& in) { return mean(in[0], axis, keepdim); }, {x}));
      }
  }
}

TEST_CASE("embedding gradient matches finite differences, repeated ids accumulating", "[gradcheck][embedding]") {
  Rng rng(38);
  Var w = param({5, 3}, rng);
  IntTensor ids({2, 4});
  ids.data = {0, 3, 3, 4, 1, 3, 0, 2};  // id 3 three times, id 0 twice
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([ids](const std::vector<Var>& in) { return embedding(in[0], ids); }, {w}));
  IntTensor one(Shape{});
  one.data = {4};  // a 0-d id gives one row (d)
  ATTNLAB_REQUIRE_GRADCHECK(gradcheck([one](const std::vector<Var>& in) { return embedding(in[0], one); }, {w}));
}

TEST_CASE("dropout gradient matches finite differences with a fixed mask", "[gradcheck][dropout]") {
  Rng rng(39);
  for (double p : {0.3, 0.75}) {
    INFO("p = " << p);
    Var x = param({4, 5}, rng);
    // The generator is recreated inside fn so every evaluation draws the same mask.
    ATTNLAB_REQUIRE_GRADCHECK(gradcheck(
        [p](const std::vector<Var>& in) {
          Rng dropout_rng(77);
          return dropout(in[0], p, dropout_rng, true);
        },
        {x}));
  }
}
