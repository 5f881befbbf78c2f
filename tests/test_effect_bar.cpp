// The effect bar of attnlab ablate's table (cli/effect_bar.h).
#include <catch2/catch.hpp>

#include "cli/effect_bar.h"

using attnlab::cli::effect_bar;

TEST_CASE("ablate's effect bar: full for the largest, in proportion, one for a tiny effect, none for none",
          "[cli][ablate]") {
  CHECK(effect_bar(0.4, 0.4, 20) == 20);
  CHECK(effect_bar(0.2, 0.4, 20) == 10);
  CHECK(effect_bar(0.09375, 1.0, 16) == 2);  // 1.5 exactly: rounds half away from zero
  CHECK(effect_bar(0.001, 0.4, 20) == 1);  // 0.05 of a '#': still one, so that an effect shows
  CHECK(effect_bar(0, 0.4, 20) == 0);
  CHECK(effect_bar(-0.1, 0.4, 20) == 0);  // a knock-out that helps gets no bar
  CHECK(effect_bar(0, 0, 20) == 0);       // no effect anywhere: no bars
  CHECK(effect_bar(0.5, 2.0, 8) == 2);
}
