// A steady-state training step takes no memory from the system: every buffer
// it needs comes back from the cache of freed tensor buffers.
#include <catch2/catch.hpp>

#include "framework/memory_pool.h"
#include "framework/ops/loss.h"
#include "framework/optim/optim.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"
#include "training/thread_slices.h"

#include <thread>

using namespace attnlab;

TEST_CASE("after warm-up a training step allocates nothing fresh", "[memory]") {
#if defined(__SANITIZE_ADDRESS__)
  SUCCEED("the buffer cache is bypassed under AddressSanitizer");
  return;
#endif
  auto model = make_model(testing::model_config("encoder", 12, 8, 16, 2, 2, 32), 1);
  auto optimizer = make_optimizer(OptimizerConfig{}, model->named_parameters());
  ModelInput in;
  in.src = IntTensor({4, 8});
  IntTensor targets({4, 8});
  for (int64_t i = 0; i < 32; ++i) {
    in.src.data[static_cast<size_t>(i)] = static_cast<int32_t>(i % 12);
    targets.data[static_cast<size_t>(i)] = static_cast<int32_t>((i * 5) % 12);
  }
  auto step = [&] {
    model->zero_grad();
    Var loss = cross_entropy(model->forward(in), targets);
    backward(loss);
    optimizer->step();
    return loss.item();
  };
  step();
  step();
  const uint64_t fresh_before = memory::stats().fresh;
  const uint64_t reused_before = memory::stats().reused;
  step();
  CHECK(memory::stats().fresh == fresh_before);
  CHECK(memory::stats().reused > reused_before);  // the step did allocate: from the cache
}

TEST_CASE("a freed block goes to its thread's cache: that thread takes it again, another thread gets its own, and a "
          "thread's cache is counted after it ends",
          "[memory]") {
#if defined(__SANITIZE_ADDRESS__)
  SUCCEED("the buffer cache is bypassed under AddressSanitizer");
  return;
#endif
  constexpr std::size_t kBytes = 64 * 12345;  // a size no other test allocates
  void* mine = memory::allocate(kBytes);
  memory::release(mine, kBytes);
  const uint64_t fresh_before = memory::stats().fresh;
  void* theirs = nullptr;
  std::thread other([&] {
    theirs = memory::allocate(kBytes);
    memory::release(theirs, kBytes);
  });
  other.join();
  CHECK(theirs != mine);
  CHECK(memory::stats().fresh == fresh_before + 1);  // the ended thread's count stays
  void* again = memory::allocate(kBytes);
  CHECK(again == mine);
  memory::release(again, kBytes);
}

TEST_CASE("after warm-up a step of two threads running batch slices allocates nothing fresh", "[memory]") {
#if defined(__SANITIZE_ADDRESS__)
  SUCCEED("the buffer cache is bypassed under AddressSanitizer");
  return;
#endif
  auto model = make_model(testing::model_config("encoder", 12, 8, 16, 2, 2, 32), 1);
  auto optimizer = make_optimizer(OptimizerConfig{}, model->named_parameters());
  ThreadSlices slices(*model, 2);
  std::vector<ModelInput> in(2);
  std::vector<IntTensor> targets(2, IntTensor({2, 8}));
  for (size_t k = 0; k < 2; ++k) {
    in[k].src = IntTensor({2, 8});
    for (int64_t i = 0; i < 16; ++i) {
      in[k].src.data[static_cast<size_t>(i)] = static_cast<int32_t>((i + 3 * k) % 12);
      targets[k].data[static_cast<size_t>(i)] = static_cast<int32_t>((i * 5 + k) % 12);
    }
  }
  auto step = [&] {
    slices.sum_in_place(2, [&](SequenceModel& on, int64_t k) {
      on.zero_grad();
      backward(cross_entropy(on.forward(in[static_cast<size_t>(k)]), targets[static_cast<size_t>(k)]), Real(0.5));
    });
    optimizer->step();
  };
  step();
  step();
  const uint64_t fresh_before = memory::stats().fresh;
  step();
  CHECK(memory::stats().fresh == fresh_before);
}

TEST_CASE("trim gives every cached block back: nothing stays cached and the next allocation is fresh", "[memory]") {
#if defined(__SANITIZE_ADDRESS__)
  SUCCEED("the buffer cache is bypassed under AddressSanitizer");
  return;
#endif
  constexpr std::size_t kBytes = 64 * 23456;
  memory::release(memory::allocate(kBytes), kBytes);
  REQUIRE(memory::stats().cached_bytes >= kBytes);
  memory::trim();
  CHECK(memory::stats().cached_bytes == 0);
  const uint64_t fresh_before = memory::stats().fresh;
  void* block = memory::allocate(kBytes);
  CHECK(memory::stats().fresh == fresh_before + 1);
  memory::release(block, kBytes);
}
