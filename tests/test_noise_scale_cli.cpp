// train --noise-scale through the attnlab executable: metrics.csv's noise_*
// columns every row (empty without the flag), a run whose bits the flag does
// not change, determinism, a resume that goes on with the averages' bits,
// mpirun -np K equal to --grad-accum K, and the refusal of one micro-batch.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "tests/cli_harness.h"
#include "tests/metrics_column.h"

using attnlab::testing::checkpoint_difference;
using attnlab::testing::checkpoint_stem;
using attnlab::testing::CliResult;
using attnlab::testing::metrics_column;
using attnlab::testing::metrics_without_times;
using attnlab::testing::require_same_run;
using attnlab::testing::run_attnlab;
using attnlab::testing::TempDir;

namespace {

const std::string kFlags =
    " --task reverse --vocab 5 --min-len 4 --max-len 6 --d-model 16 --heads 2 --layers 1 --d-ff 32 --heldout 30"
    " --target 0 --log-every 5 --eval-every 10 --batch-size 12 --quiet";

}  // namespace

TEST_CASE("train --noise-scale fills noise_scale, noise_trace over noise_grad_sq, in every row and changes no bit of the "
          "run, and without it the columns are empty",
          "[cli][noise_scale]") {
  TempDir dir("noise-cli");
  const std::string on = dir / "on", off = dir / "off";
  REQUIRE(run_attnlab("train" + kFlags + " --steps 20 --grad-accum 4 --noise-scale --run " + on).code == 0);
  REQUIRE(run_attnlab("train" + kFlags + " --steps 20 --grad-accum 4 --run " + off).code == 0);
  const auto scale = metrics_column(on, "noise_scale"), trace = metrics_column(on, "noise_trace");
  const auto g2 = metrics_column(on, "noise_grad_sq");
  REQUIRE(scale.size() == 4);
  for (size_t i = 0; i < scale.size(); ++i) {
    REQUIRE(!scale[i].empty());
    CHECK(std::stod(scale[i]) == Approx(std::stod(trace[i]) / std::stod(g2[i])).epsilon(1e-5));
    CHECK(std::stod(trace[i]) > 0);
  }
  for (const char* name : {"noise_scale", "noise_trace", "noise_grad_sq"})
    for (const std::string& cell : metrics_column(off, name)) CHECK(cell.empty());
  CHECK(metrics_column(on, "loss") == metrics_column(off, "loss"));
  CHECK(metrics_column(on, "grad_norm") == metrics_column(off, "grad_norm"));
  CHECK(checkpoint_difference(checkpoint_stem(on, 20) + ".safetensors", checkpoint_stem(off, 20) + ".safetensors") ==
        "");
}

TEST_CASE("train --noise-scale is deterministic, and a resumed run goes on with the moving averages' bits",
          "[cli][noise_scale]") {
  TempDir dir("noise-resume");
  const std::string flags = "train" + kFlags + " --grad-accum 3 --noise-scale --steps 30 --run ";
  REQUIRE(run_attnlab(flags + dir / "a").code == 0);
  REQUIRE(run_attnlab(flags + dir / "b").code == 0);
  require_same_run(dir / "a", dir / "b", 30);
  REQUIRE(run_attnlab("train" + kFlags + " --grad-accum 3 --noise-scale --steps 20 --run " + dir / "resumed").code ==
          0);
  REQUIRE(run_attnlab("train --resume " + dir / "resumed" + " --steps 30 --quiet").code == 0);
  require_same_run(dir / "a", dir / "resumed", 30);
}

TEST_CASE("train --noise-scale with one micro-batch a step is refused: one line, exit 2, nothing written",
          "[cli][noise_scale]") {
  TempDir dir("noise-refused");
  const CliResult r = run_attnlab("train" + kFlags + " --steps 10 --noise-scale --run " + dir / "run");
  CHECK(r.code == 2);
  CHECK(r.out ==
        "attnlab train: --noise-scale needs at least 2 micro-batches a step: --grad-accum 2 or more, or mpirun -np 2 "
        "or more, not 1\n");
  CHECK_FALSE(std::filesystem::exists(dir / "run"));
}

#ifdef ATTNLAB_MPIEXEC
TEST_CASE("mpirun -np 2 --noise-scale gives the bits of --grad-accum 2, noise columns included, and -np 2 "
          "--grad-accum 2 those of --grad-accum 4",
          "[cli][noise_scale][mpi]") {
  TempDir dir("noise-mpi");
  const auto mpirun = [](int np, const std::string& args) {
    return attnlab::testing::run_executable(ATTNLAB_MPIEXEC,
                                            "--oversubscribe -np " + std::to_string(np) + " " + ATTNLAB_EXE + " " + args,
                                            "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  };
  const std::string flags = "train" + kFlags + " --noise-scale --steps 20";
  for (const auto& [np, accum] : {std::pair<int, int>{2, 1}, std::pair<int, int>{2, 2}}) {
    const std::string ranks = dir / ("np" + std::to_string(np) + "x" + std::to_string(accum));
    const std::string one = dir / ("accum" + std::to_string(np * accum));
    const CliResult r = mpirun(np, flags + " --grad-accum " + std::to_string(accum) + " --run " + ranks);
    INFO(r.out);
    REQUIRE(r.code == 0);
    REQUIRE(run_attnlab(flags + " --grad-accum " + std::to_string(np * accum) + " --run " + one).code == 0);
    require_same_run(ranks, one, 20);
    CHECK(!metrics_column(ranks, "noise_scale").front().empty());
  }
}
#endif
