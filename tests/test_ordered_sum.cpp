// training/distributed/ordered_sum.h on one process: the summation tree, the
// partial sums a process of K micro-batches sends, and the choice between the
// two ways (the multi-process bits are tests/test_mpi.cpp's, with real mpirun jobs).
#include <catch2/catch.hpp>

#include <filesystem>

#include "framework/error.h"
#include "models/config.h"
#include "tests/cli_harness.h"
#include "training/distributed/ordered_sum.h"

using namespace attnlab;

namespace {

std::vector<Real> leaf_values(const std::vector<Real>& per_micro, int64_t m) { return {per_micro[static_cast<size_t>(m)]}; }

}  // namespace

TEST_CASE("the tree splits at the largest power of two below the count: ((g0 + g1) + g2), (g0 + g1) + (g2 + g3)",
          "[distributed]") {
  // 1e8 + 1 rounds to 1e8 in float: the grouping shows in the result.
  const std::vector<Real> g = {Real(1e8), 1, Real(-1e8), 1};
  const auto leaf = [&](int64_t m) { return leaf_values(g, m); };
  // Four: (1e8 + 1) + (-1e8 + 1) = 1e8 - 1e8 = 0, where left to right gives 1.
  CHECK(local_partial_sums(4, 0, 4, leaf) == std::vector<Real>{0});
  // Three: (1 + 1e8) - 1e8 = 0, where 1 + (1e8 - 1e8) gives 1.
  const std::vector<Real> h = {1, Real(1e8), Real(-1e8)};
  CHECK(local_partial_sums(3, 0, 3, [&](int64_t m) { return leaf_values(h, m); }) == std::vector<Real>{0});
  std::vector<int64_t> order;  // leaves are asked for in micro-batch order
  local_partial_sums(7, 0, 7, [&](int64_t m) {
    order.push_back(m);
    return std::vector<Real>{0};
  });
  CHECK(order == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6});
}

TEST_CASE("a process's micro-batches are one subtree when K is a power of two, a few otherwise", "[distributed]") {
  using N = std::vector<SumNode>;
  CHECK(subtrees_within(8, 4, 6) == N{{4, 6}});
  CHECK(subtrees_within(6, 2, 4) == N{{2, 4}});        // N = 3, K = 2
  CHECK(subtrees_within(10, 8, 10) == N{{8, 10}});     // N = 5, K = 2, the last rank
  CHECK(subtrees_within(12, 4, 8) == N{{4, 8}});       // N = 3, K = 4
  CHECK(subtrees_within(6, 0, 3) == N{{0, 2}, {2, 3}});  // N = 2, K = 3
  CHECK(subtrees_within(6, 3, 6) == N{{3, 4}, {4, 6}});
  CHECK(subtrees_within(5, 0, 5) == N{{0, 5}});  // one process: the whole tree
  // The partial sums of [0, 3) of 6: (g0 + g1) then g2, one buffer each.
  const std::vector<Real> g = {1, 2, 4, 8, 16, 32};
  CHECK(local_partial_sums(6, 0, 3, [&](int64_t m) { return leaf_values(g, m); }) == std::vector<Real>{3, 4});
}

TEST_CASE("ordered_sum on one process returns its partial sum, whichever way is asked", "[distributed]") {
  const std::vector<Real> partial = {Real(1.5), 2, 3};
  for (Reduction how : {Reduction::automatic, Reduction::gather, Reduction::reduce_scatter})
    CHECK(ordered_sum(single_process(), partial, 4, {0, 3}, how) == partial);
}

TEST_CASE("automatic takes the way that receives fewer bytes, and gather for small buffers", "[distributed]") {
  const int64_t big = 4'000'000, small = 1000;
  CHECK(choose_reduction(big, 2, 1) == Reduction::gather);  // a tie: P both ways; one collective
  CHECK(choose_reduction(big, 2, 2) == Reduction::gather);  // K = 2 sends one partial sum: the same tie
  CHECK(choose_reduction(big, 2, 3) == Reduction::reduce_scatter);  // 2 partial sums per rank
  CHECK(choose_reduction(big, 4, 1) == Reduction::reduce_scatter);
  CHECK(choose_reduction(small, 4, 1) == Reduction::gather);
  CHECK(choose_reduction(big, 1, 4) == Reduction::gather);  // one process: nothing moves
}

TEST_CASE("automatic's gather threshold is 256 KiB of gradient, counted in bytes, not elements", "[distributed]") {
  // At N = 4 the reduce-scatter receives about half the gather's bytes: a
  // threshold read in elements would keep 4 ranks on the gather (twice the
  // bytes) up to 262,144 elements, four times the intended size.
  const int64_t threshold = 256 * 1024 / static_cast<int64_t>(sizeof(Real));
  CHECK(choose_reduction(threshold - 1, 4, 1) == Reduction::gather);
  CHECK(choose_reduction(threshold, 4, 1) == Reduction::reduce_scatter);
  CHECK(choose_reduction(100'000, 4, 1) == Reduction::reduce_scatter);
}

TEST_CASE("reductions are named as the flag spells them, and an unknown one is refused naming it where the flag "
          "is read",
          "[distributed]") {
  for (Reduction r : {Reduction::automatic, Reduction::gather, Reduction::reduce_scatter})
    CHECK(choice_named<Reduction>(name_of(r)) == r);
  CHECK(name_of(Reduction::automatic) == "auto");
  CHECK(name_of(Reduction::reduce_scatter) == "reduce-scatter");
  CHECK_FALSE(choice_named<Reduction>("ring"));
  testing::TempDir dir("reduction-name");
  const testing::CliResult r = testing::run_attnlab("train --reduction ring --steps 1 --run " + (dir / "never"));
  CHECK(r.code == 2);
  CHECK(r.out.find("--reduction must be one of auto, gather, reduce-scatter, got 'ring'") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "never"));
}

TEST_CASE("tree_sum gives local_partial_sums' bits element by element for 1 to 6 leaves, across its chunks, in place "
          "into the first leaf, with a missing leaf as zeros",
          "[distributed]") {
  constexpr int64_t kCount = 2500;  // past two chunks of 1024
  std::vector<std::vector<Real>> leaves;
  for (int64_t k = 0; k < 6; ++k) {
    std::vector<Real> v(kCount);
    // Magnitudes 1e8 apart, so a changed grouping changes the bits.
    const Real scale = k % 2 ? Real(1e8) : Real(1);
    for (int64_t i = 0; i < kCount; ++i)
      v[static_cast<size_t>(i)] = static_cast<Real>((i * 7 + k * 13) % 11 - 5) * scale + static_cast<Real>(k);
    leaves.push_back(v);
  }
  for (int64_t n = 1; n <= 6; ++n) {
    INFO(n << " leaves");
    const std::vector<Real> expected = local_partial_sums(n, 0, n, [&](int64_t m) { return leaves[static_cast<size_t>(m)]; });
    std::vector<const Real*> pointers;
    for (int64_t m = 0; m < n; ++m) pointers.push_back(leaves[static_cast<size_t>(m)].data());
    std::vector<Real> out(kCount, Real(-7));
    tree_sum(pointers, out.data(), kCount);
    CHECK(out == expected);
    std::vector<Real> first = leaves[0];
    pointers[0] = first.data();
    tree_sum(pointers, first.data(), kCount);
    CHECK(first == expected);
  }
  std::vector<Real> zeros(kCount, Real(0)), with_zeros(kCount), with_null(kCount);
  tree_sum({leaves[0].data(), zeros.data(), leaves[2].data()}, with_zeros.data(), kCount);
  tree_sum({leaves[0].data(), nullptr, leaves[2].data()}, with_null.data(), kCount);
  CHECK(with_null == with_zeros);
  CHECK_THROWS(tree_sum({}, with_null.data(), kCount));
}
