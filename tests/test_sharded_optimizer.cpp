// The sharded optimizer (ZeRO-1) and the split of the parameters among
// processes (training/distributed/shards.h), simulated on one process: N
// optimizers each owning its slice, their updated slices put together after
// every step, give the bits of one unsharded optimizer, and their gathered
// state is its state. (The real mpirun jobs are tests/test_mpi.cpp's.)
#include <catch2/catch.hpp>

#include <cstring>

#include "framework/optim/chunks.h"
#include "framework/optim/optim.h"
#include "framework/random.h"
#include "training/distributed/shards.h"

using namespace attnlab;
using Catch::Matchers::Contains;

namespace {

// Sizes over a chunk boundary, under a chunk, and a parameter of 1 element.
const std::vector<int64_t> kSizes = {5000, 37, 1, 4100, 300};

NamedParams make_params(uint64_t seed) {
  Rng rng(seed);
  NamedParams out;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    Tensor t({kSizes[i]});
    for (int64_t e = 0; e < t.numel(); ++e) t[e] = static_cast<Real>(rng.normal());
    out.emplace_back((i == 2 ? "ln.bias" : "w" + std::to_string(i)), Var(t, true));
  }
  return out;
}

void set_gradients(NamedParams& params, uint64_t seed) {
  Rng rng(seed);
  for (auto& [name, p] : params) {
    p.grad() = Tensor(p.shape());
    for (int64_t e = 0; e < p.numel(); ++e) p.grad()[e] = static_cast<Real>(rng.normal(0, 0.1));
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(Real) * static_cast<size_t>(a.numel())) == 0;
}

// Rank `rank` of `size`, whose allgatherv returns what every rank handed in on the
// first pass (`inputs`, recorded then): the collective played twice.
class Replayed : public Communicator {
 public:
  Replayed(int rank, int size, std::vector<std::vector<Real>>& inputs) : rank_(rank), size_(size), inputs_(inputs) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<Real> allgatherv(const std::vector<Real>& local, const std::vector<int64_t>& counts) const override {
    if (static_cast<int>(inputs_.size()) < size_) {
      inputs_.push_back(local);
      int64_t total = 0;
      for (int64_t c : counts) total += c;
      return std::vector<Real>(static_cast<size_t>(total), Real(0));
    }
    std::vector<Real> all;
    for (const auto& v : inputs_) all.insert(all.end(), v.begin(), v.end());
    return all;
  }

 private:
  int rank_, size_;
  std::vector<std::vector<Real>>& inputs_;
};

OptimizerConfig config_named(const std::string& name) {
  OptimizerConfig c;
  c.kind = parse_choice<OptimizerKind>("optimizer", name);
  c.lr = 0.01;
  c.weight_decay = 0.1;
  if (name == "sgd") c.momentum = 0.9, c.nesterov = true;
  return c;
}

}  // namespace

TEST_CASE("shard bounds lie at parameter starts or chunk multiples, nearest an even split, and cover every element "
          "once", "[distributed][shard]") {
  const int64_t P = 5000 + 37 + 1 + 4100 + 300;
  for (int n : {1, 2, 3, 4, 5, 8}) {
    const std::vector<int64_t> bounds = shard_bounds(kSizes, n);
    REQUIRE(bounds.size() == static_cast<size_t>(n) + 1);
    CHECK(bounds.front() == 0);
    CHECK(bounds.back() == P);
    std::vector<int64_t> owned(kSizes.size(), 0);
    for (int r = 0; r < n; ++r) {
      CHECK(bounds[static_cast<size_t>(r)] <= bounds[static_cast<size_t>(r) + 1]);
      // Every point is allowed here and points lie at most kOptimChunk apart.
      CHECK(std::abs(bounds[static_cast<size_t>(r)] - P * r / n) <= kOptimChunk / 2);
      const std::vector<ElementRange> ranges = owned_ranges(kSizes, bounds, r);
      for (size_t i = 0; i < kSizes.size(); ++i) {
        CHECK(ranges[i].begin % kOptimChunk == 0);
        owned[i] += ranges[i].size();
      }
    }
    CHECK(owned == kSizes);
  }
  // One parameter of 3 chunks over 2 ranks: the boundary is the chunk point nearest the middle.
  CHECK(shard_bounds({3 * kOptimChunk}, 2) == std::vector<int64_t>{0, kOptimChunk, 3 * kOptimChunk});
  CHECK(shard_bounds({10, 10, 10}, 2) == std::vector<int64_t>{0, 10, 30});  // 15 is as far from 10 as from 20
}

TEST_CASE("N sharded optimizers, each updating its slice, give the bits of one unsharded optimizer, and their gathered "
          "state is its state", "[distributed][shard]") {
  for (const std::string name : {"adamw", "adam", "sgd"})
    for (int n : {2, 3, 5}) {
      INFO(name << " over " << n << " shards");
      NamedParams whole_params = make_params(1);
      auto whole = make_optimizer(config_named(name), whole_params);
      const std::vector<int64_t> bounds = shard_bounds(kSizes, n);
      std::vector<NamedParams> rank_params;
      std::vector<std::unique_ptr<Optimizer>> shards;
      for (int r = 0; r < n; ++r) {
        rank_params.push_back(make_params(1));
        shards.push_back(make_optimizer(config_named(name), rank_params.back()));
        shards.back()->shard(owned_ranges(kSizes, bounds, r));
      }
      for (uint64_t step = 1; step <= 3; ++step) {
        set_gradients(whole_params, 100 + step);
        whole->step();
        for (int r = 0; r < n; ++r) {
          set_gradients(rank_params[static_cast<size_t>(r)], 100 + step);
          shards[static_cast<size_t>(r)]->step();
        }
        // The all-gather: each parameter's owned elements from their owner, to every rank.
        for (int r = 0; r < n; ++r) {
          const std::vector<ElementRange> mine = owned_ranges(kSizes, bounds, r);
          for (int to = 0; to < n; ++to)
            for (size_t i = 0; i < kSizes.size(); ++i) {
              const Real* from = rank_params[static_cast<size_t>(r)][i].second.value().data();
              std::copy(from + mine[i].begin, from + mine[i].end,
                        rank_params[static_cast<size_t>(to)][i].second.value().data() + mine[i].begin);
            }
        }
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < kSizes.size(); ++i)
            CHECK(same_bits(rank_params[static_cast<size_t>(r)][i].second.value(), whole_params[i].second.value()));
      }
      // Gathered state = the unsharded state, entry by entry.
      std::vector<std::vector<Real>> inputs;
      for (int pass = 0; pass < 2; ++pass)
        for (int r = 0; r < n; ++r) {
          const NamedTensors state = full_optimizer_state(Replayed(r, n, inputs), *shards[static_cast<size_t>(r)], bounds);
          if (pass == 0) continue;
          const NamedTensors expected = whole->state();
          REQUIRE(state.size() == expected.size());
          for (size_t e = 0; e < state.size(); ++e) {
            INFO(expected[e].first);
            CHECK(state[e].first == expected[e].first);
            CHECK(same_bits(state[e].second, expected[e].second));
          }
        }
      // A sharded optimizer holds 1/N of the buffers, give or take half a chunk at each end of its slice.
      const double share = static_cast<double>(shards[0]->state_bytes()) / static_cast<double>(whole->state_bytes());
      CHECK(std::abs(share - 1.0 / n) <= static_cast<double>(kOptimChunk) / 9438.0);
    }
}

TEST_CASE("a sharded optimizer loads a whole state (a checkpoint's) and keeps its slice: the next step is the "
          "unsharded one's", "[distributed][shard]") {
  NamedParams a = make_params(2), b = make_params(2);
  auto whole = make_optimizer(config_named("adamw"), a);
  set_gradients(a, 7);
  whole->step();
  auto sharded = make_optimizer(config_named("adamw"), b);
  const std::vector<int64_t> bounds = shard_bounds(kSizes, 2);
  sharded->shard(owned_ranges(kSizes, bounds, 1));
  sharded->load_state(whole->state());
  for (size_t i = 0; i < kSizes.size(); ++i) b[i].second.value() = a[i].second.value();
  set_gradients(a, 8);
  set_gradients(b, 8);
  whole->step();
  sharded->step();
  const std::vector<ElementRange> mine = owned_ranges(kSizes, bounds, 1);
  for (size_t i = 0; i < kSizes.size(); ++i)
    for (int64_t e = mine[i].begin; e < mine[i].end; ++e) REQUIRE(b[i].second.value()[e] == a[i].second.value()[e]);
}

TEST_CASE("shard refuses a range off the chunk grid, outside its parameter, a count that is not the parameters', "
          "and a second sharding", "[distributed][shard]") {
  NamedParams p = make_params(3);
  auto opt = make_optimizer(config_named("adamw"), p);
  std::vector<ElementRange> ranges(kSizes.size());
  ranges[0] = {100, 5000};
  CHECK_THROWS_WITH(opt->shard(ranges), Contains("[100, 5000)") && Contains("'w0'") && Contains("2048"));
  ranges[0] = {0, 5001};
  CHECK_THROWS_WITH(opt->shard(ranges), Contains("[0, 5001)"));
  CHECK_THROWS_WITH(opt->shard({}), Contains("0 ranges for 5 parameters"));
  ranges[0] = {2048, 5000};
  opt->shard(ranges);
  CHECK(opt->sharded());
  CHECK_THROWS_AS(opt->shard(ranges), std::logic_error);
}

TEST_CASE("the gradient norm over chunk sums is the same however the chunks are shared out", "[optim][shard]") {
  NamedParams p = make_params(4);
  set_gradients(p, 9);
  std::vector<Var> vars;
  for (auto& [name, v] : p) vars.push_back(v);
  const double whole = grad_norm(vars);
  for (int n : {2, 3, 5}) {
    const std::vector<int64_t> bounds = shard_bounds(kSizes, n);
    std::vector<double> sums;  // rank by rank, as sharded_grad_norm's all-gather lays them out
    for (int r = 0; r < n; ++r) {
      const std::vector<ElementRange> mine = owned_ranges(kSizes, bounds, r);
      for (size_t i = 0; i < vars.size(); ++i)
        chunk_square_sums(vars[i].grad().data() + mine[i].begin, mine[i].size(), sums);
    }
    CHECK(norm_of(sums) == whole);
  }
  // And it is the L2 norm.
  double sq = 0;
  for (const Var& v : vars)
    for (int64_t e = 0; e < v.numel(); ++e) sq += static_cast<double>(v.grad()[e]) * v.grad()[e];
  CHECK(whole == Approx(std::sqrt(sq)).epsilon(1e-12));
}
