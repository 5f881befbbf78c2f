// training/distributed/ordered_sum.h on one process, and the choice between its two ways
// (the multi-process bits are tests/test_mpi.cpp's, with real mpirun jobs).
#include <catch2/catch.hpp>

#include "framework/error.h"
#include "training/distributed/ordered_sum.h"

using namespace attnlab;

TEST_CASE("ordered_sum on one process sums its K buffers left to right, whichever way is asked", "[distributed]") {
  // 1e8 + 1 - 1e8 in float: (1e8 + 1) rounds to 1e8, so left to right gives 0; any other order gives 1.
  const std::vector<Real> local = {Real(1e8), 2, Real(1), 3, Real(-1e8), 4};  // K = 3 buffers of P = 2
  for (Reduction how : {Reduction::automatic, Reduction::gather, Reduction::reduce_scatter}) {
    const std::vector<Real> sum = ordered_sum(single_process(), local, 3, how);
    REQUIRE(sum.size() == 2);
    CHECK(sum[0] == ((Real(1e8) + Real(1)) + Real(-1e8)));
    CHECK(sum[1] == 9);
  }
}

TEST_CASE("slices cover the buffer once, differ by at most one element, also when N does not divide P",
          "[distributed]") {
  for (int n : {1, 2, 3, 5, 7}) {
    CHECK(slice_begin(10, n, 0) == 0);
    CHECK(slice_begin(10, n, n) == 10);
    for (int j = 0; j < n; ++j) {
      const int64_t size = slice_begin(10, n, j + 1) - slice_begin(10, n, j);
      CHECK((size == 10 / n || size == 10 / n + 1));
    }
  }
}

TEST_CASE("automatic takes the way that receives fewer bytes, and gather for small buffers", "[distributed]") {
  const int64_t big = 4'000'000, small = 1000;
  CHECK(choose_reduction(big, 2, 1) == Reduction::gather);  // a tie: (N-1)K P = P both ways; one collective
  CHECK(choose_reduction(big, 2, 2) == Reduction::reduce_scatter);
  CHECK(choose_reduction(big, 4, 1) == Reduction::reduce_scatter);
  CHECK(choose_reduction(small, 4, 1) == Reduction::gather);
  CHECK(choose_reduction(big, 1, 4) == Reduction::gather);  // one process: nothing moves
}

TEST_CASE("reductions are named as the flag spells them, and an unknown one is refused naming it", "[distributed]") {
  for (Reduction r : {Reduction::automatic, Reduction::gather, Reduction::reduce_scatter})
    CHECK(parse_reduction(reduction_name(r)) == r);
  CHECK(reduction_name(Reduction::reduce_scatter) == "reduce-scatter");
  CHECK_THROWS_WITH(parse_reduction("ring"), Catch::Contains("'ring'") && Catch::Contains("reduce-scatter"));
}
