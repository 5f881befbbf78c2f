// MetricsLog's interval state (training/metrics_log.h): the figures summed
// since the last metrics row, written into a checkpoint as exact text and
// read back on resume; malformed text is refused by name.
#include <catch2/catch.hpp>

#include <string>

#include "framework/error.h"
#include "training/metrics_log.h"

using namespace attnlab;

namespace {

StepResult step_of(int64_t step, double loss, int64_t tokens) {
  StepResult r;
  r.step = step;
  r.loss = loss;
  r.grad_norm = 0.1 * static_cast<double>(step);
  r.tokens = tokens;
  return r;
}

}  // namespace

TEST_CASE("the metrics interval state reads back to the bit, and a log set from it writes the same state",
          "[training][metrics]") {
  MetricsLog log("", -1);
  log.add(step_of(1, 2.0 / 3.0, 40));
  log.add(step_of(2, 1.0 / 7.0, 41));
  const std::string state = log.interval_state();
  MetricsLog resumed("", -1);
  resumed.set_interval_state(state, "step-2.safetensors");
  CHECK(resumed.interval_steps() == 2);
  CHECK(resumed.interval_state() == state);
}

TEST_CASE("a malformed metrics interval state is refused, naming its source and the text", "[training][metrics]") {
  MetricsLog log("", -1);
  const std::string ok = "2 81 0x1p+0 0x1p-1 0x0p+0 0x1p-2";
  CHECK_NOTHROW(log.set_interval_state(ok, "src"));
  for (const std::string bad : {"-1 81 0x1p+0 0x1p-1 0x0p+0 0x1p-2",  // a negative step count
                                "2 -81 0x1p+0 0x1p-1 0x0p+0 0x1p-2",  // a negative token count
                                "2 81 0x1p+0 0x1p-1 0x0p+0",          // a field short
                                "2 81 0x1p+0 0x1p-1 0x0p+0 0x1p-2 x"}) {  // trailing text
    INFO(bad);
    CHECK_THROWS_AS(log.set_interval_state(bad, "src"), IoError);
    CHECK_THROWS_WITH(log.set_interval_state(bad, "src"),
                      Catch::StartsWith("src: malformed metrics_interval '") && Catch::Contains("in its metadata"));
  }
  CHECK(log.interval_state() == ok);  // a refused text leaves the state as it was
}
