// The record of matrix products (framework/ops/gemm_log.h) and their replay
// (bench/gemm_replay.h), which bench uses to bound a step's speed by its
// products alone: a log records each gemm() and gemm_batched() call once, with
// its sizes, only while it lives; a training step of docs/benchmark.md's
// encoder records exactly 3x the forward FLOPs of its formula (so the bound is
// computed over the right work); a replay makes the same calls again, on its
// own operands.
#include <omp.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/gemm_replay.h"
#include "framework/ops/gemm_log.h"
#include "framework/ops/loss.h"
#include "framework/ops/matmul.h"
#include "framework/ops/reduce.h"
#include "models/sequence_model.h"
#include "tests/cli_harness.h"
#include "tests/fixtures.h"

using namespace attnlab;

namespace {

// Sizes, flags and strides of a call, without its data pointers.
bool same_shape(const GemmCall& x, const GemmCall& y) {
  auto op = [](const GemmOperand& a, const GemmOperand& b) {
    return a.rows == b.rows && a.cols == b.cols && a.ld == b.ld && a.trans == b.trans;
  };
  return x.count == y.count && x.c.rows == y.c.rows && x.c.cols == y.c.cols && x.c.ld == y.c.ld &&
         x.c_stride == y.c_stride && x.a_stride == y.a_stride && x.b_stride == y.b_stride && op(x.a, y.a) &&
         op(x.b, y.b) && x.alpha == y.alpha && x.accumulate == y.accumulate && x.in_parallel == y.in_parallel;
}

}  // namespace

TEST_CASE("a GemmLog records each gemm and gemm_batched call once, with its sizes, only while it lives", "[gemm]") {
  std::vector<Real> a(6 * 5, 0.5f), b(5 * 4 * 3, 0.25f), c(3 * 6 * 4, 0);
  gemm({c.data(), 6, 4, 4}, {a.data(), 6, 5, 5}, {b.data(), 5, 4, 4}, 1, false);  // before: not recorded
  std::vector<GemmCall> calls;
  {
    GemmLog log;
    REQUIRE_THROWS_AS(GemmLog(), std::logic_error);  // one log at a time
    gemm({c.data(), 6, 4, 4}, {a.data(), 5, 6, 6, true}, {b.data(), 5, 4, 4}, 2, true);
    // Three products C_i = A B_i: one record, not three (gemm_batched calls the product per item itself).
    gemm_batched(3, {c.data(), 6, 4, 4}, 24, {a.data(), 6, 5, 5}, 0, {b.data(), 5, 4, 4}, 20, 1, false);
    calls = log.calls();
    CHECK(log.flops() == Approx(2.0 * 6 * 4 * 5 * (1 + 3)));
  }
  gemm({c.data(), 6, 4, 4}, {a.data(), 6, 5, 5}, {b.data(), 5, 4, 4}, 1, false);  // after: not recorded
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].count == 1);
  CHECK(calls[0].a.trans);
  CHECK(calls[0].a.op_cols() == 5);
  CHECK(calls[0].alpha == 2);
  CHECK(calls[0].accumulate);
  CHECK(calls[0].c.data == c.data());
  CHECK(calls[1].count == 3);
  CHECK(calls[1].c_stride == 24);
  CHECK(calls[1].a_stride == 0);
  CHECK(calls[1].b_stride == 20);
  CHECK_FALSE(calls[1].accumulate);
  CHECK_FALSE(calls[1].in_parallel);
  CHECK(calls[1].flops() == Approx(2.0 * 3 * 6 * 4 * 5));
  GemmLog again;  // the first log's end freed the place
}

TEST_CASE("matmul stacks the batches of an upright operand times a shared matrix into one product, and its "
          "weight gradient's batches along k, where a batched call would make one product per batch",
          "[gemm]") {
  Var a(Tensor({4, 8, 16}, 0.5f), true), w(Tensor({16, 8}, 0.25f), true), b3(Tensor({4, 16, 8}, 0.25f));
  std::vector<GemmCall> calls;
  {
    GemmLog log;
    backward(sum(matmul(a, w, false, false)));
    matmul(a, b3, false, false);  // batch against batch: nothing to stack
    calls = log.calls();
  }
  REQUIRE(calls.size() == 4);  // forward, dA, dW, then the batched product
  CHECK(calls[0].count == 1);  // (4·8, 16)·(16, 8)
  CHECK(calls[0].c.rows == 32);
  const auto dw = std::find_if(calls.begin() + 1, calls.begin() + 3, [](const GemmCall& c) { return c.a.trans; });
  REQUIRE(dw != calls.begin() + 3);
  CHECK(dw->count == 1);  // (16, 4·8)·(4·8, 8)
  CHECK(dw->a.op_cols() == 32);
  CHECK(calls[3].count == 4);
}

TEST_CASE("one training step of the benchmark's S encoder makes 3x its documented forward FLOPs in products",
          "[gemm]") {
  // docs/benchmark.md: forward FLOPs per token = L (8 d^2 + 4 d d_ff + 4 T d) + 2 d V; a step is
  // forward + backward, and every product's backward makes two products of its size.
  const int64_t V = 16, T = 16, d = 64, h = 4, L = 2, d_ff = 256, B = 8;
  auto model = make_model(attnlab::testing::model_config("encoder", V, T, d, h, L, d_ff), 3);
  ModelInput input;
  input.src = IntTensor({B, T});
  IntTensor target({B, T});
  for (int64_t i = 0; i < B * T; ++i) {
    input.src.data[static_cast<size_t>(i)] = static_cast<int32_t>(i % V);
    target.data[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % V);
  }
  GemmLog log;
  backward(cross_entropy(model->forward(input), target));
  const double forward_per_token = L * (8.0 * d * d + 4.0 * d * d_ff + 4.0 * T * d) + 2.0 * d * V;
  CHECK(log.flops() == Approx(3 * forward_per_token * B * T).epsilon(1e-12));
}

TEST_CASE("a replay makes the recorded calls again, on its own operands, runs of parallel ones in parallel",
          "[gemm]") {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);  // the replay's parallel run must have a team of two, as the recording had
  std::vector<Real> a(8 * 8, 1.0f), b(8 * 8, 2.0f), c(4 * 8 * 8, 7.0f);
  std::vector<GemmCall> recorded;
  {
    GemmLog log;
    gemm({c.data(), 8, 8, 8}, {a.data(), 8, 8, 8}, {b.data(), 8, 8, 8, true}, 0.5f, false);
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < 4; ++i) gemm({c.data() + 64 * i, 8, 8, 8}, {a.data(), 8, 8, 8}, {b.data(), 8, 8, 8}, 1, true);
    gemm_batched(2, {c.data(), 8, 8, 8}, 0, {a.data(), 8, 8, 8}, 0, {b.data(), 8, 8, 8}, 0, 1, true);
    recorded = log.calls();
  }
  REQUIRE(recorded.size() == 6);
  CHECK_FALSE(recorded[0].in_parallel);
  for (size_t i = 1; i < 5; ++i) CHECK(recorded[i].in_parallel);
  CHECK_FALSE(recorded[5].in_parallel);
  const std::vector<Real> before = c;
  std::vector<GemmCall> replayed;
  double seconds = 0;
  {
    GemmLog log;
    seconds = bench::replay_seconds(recorded, 2);
    replayed = log.calls();
  }
  omp_set_num_threads(threads);
  CHECK(seconds > 0);
  CHECK(c == before);  // the recorded operands are never touched
  REQUIRE(replayed.size() == 2 * recorded.size());
  for (size_t i = 0; i < replayed.size(); ++i) {
    const GemmCall& want = recorded[i % recorded.size()];
    INFO("call " << i);
    // A run of parallel calls may be replayed by the threads in another order; all four have one shape.
    CHECK(same_shape(replayed[i], want));
    CHECK(replayed[i].c.data != want.c.data);
    CHECK(replayed[i].a.data != a.data());
  }
}

TEST_CASE("bench reports a step's products replayed alone: their FLOPs, time, share and the MFU bound", "[gemm][cli]") {
  auto r = attnlab::testing::run_attnlab("bench --config graph --steps 10 --warmup 2");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  // graph: V 8, T 2, d 4, h 1, L 6, d_ff 4, B 1.
  const double forward_per_token = 6 * (8.0 * 16 + 4.0 * 4 * 4 + 4.0 * 2 * 4) + 2.0 * 4 * 8;
  CHECK(j["product_gflop_per_step"].get<double>() * 1e9 == Approx(3 * forward_per_token * 2));
  // bench's model FLOP/s uses the same formula: 3x forward FLOPs per token, times tokens/s.
  CHECK(j["gflops"].get<double>() * 1e9 == Approx(3 * forward_per_token * j["tokens_per_s"].get<double>()));
  CHECK(j["products_per_step"].get<int>() > 0);
  const double ms = j["products_ms"].get<double>();
  CHECK(ms > 0);
  CHECK(j["products_share_of_step"].get<double>() == Approx(ms / j["step_ms"].get<double>()));
  CHECK(j["products_gflops"].get<double>() == Approx(j["product_gflop_per_step"].get<double>() / (ms / 1e3)));
  CHECK(j["products_mfu_bound"].get<double>() ==
        Approx(j["gflops"].get<double>() * j["step_ms"].get<double>() / ms / j["fma_peak_gflops"].get<double>()));
}

TEST_CASE("bench --products adds a table of the step's products by shape whose calls add up to the step's",
          "[gemm][cli]") {
  auto r = attnlab::testing::run_attnlab("bench --config graph --steps 4 --warmup 1 --products");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::istringstream lines(r.out);
  std::string json_line, line;
  std::getline(lines, json_line);
  const auto j = nlohmann::json::parse(json_line);
  std::vector<std::string> rows;
  while (std::getline(lines, line))
    if (line.rfind("| ", 0) == 0) rows.push_back(line);
  REQUIRE(rows.size() >= 3);  // header, at least one shape, the total
  CHECK(rows.front().find("| product (m x n x k) | calls | ms | share | GFLOP/s |") == 0);
  // graph (d 4, T 2, B 1, h 1): the first product of a step is the fused Q/K/V projection, 2 x 12 x 4 with Bᵀ.
  CHECK(rows[1].find("| 2 x 12 x 4, Bᵀ | ") == 0);
  int64_t calls = 0;
  for (size_t i = 1; i + 1 < rows.size(); ++i) {
    std::istringstream cells(rows[i].substr(rows[i].find(" | ") + 3));
    int64_t n = 0;
    cells >> n;
    CHECK(n > 0);
    calls += n;
  }
  CHECK(calls == j["products_per_step"].get<int64_t>());
  CHECK(rows.back().find("| all, each shape alone | " + std::to_string(calls) + " | ") == 0);
}
