// A steady-state training step takes no memory from the system: every buffer
// it needs comes back from the cache of freed tensor buffers.
#include <catch2/catch.hpp>

#include "framework/memory_pool.h"
#include "framework/ops/loss.h"
#include "framework/optim/optim.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"

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
