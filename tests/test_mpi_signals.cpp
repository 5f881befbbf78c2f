// mpirun jobs and what the user sees of them (issue 42): a refusal that rank
// 1 alone meets reaches the user as its own line; config.ini and the resume
// command repeat the process count; a Ctrl-C to mpirun (which Open MPI passes
// on as SIGTERM) checkpoints and says so; an evaluation a signal interrupted
// is completed on resume, to the files of the job that was never stopped.
// These run when CMake found MPI (ATTNLAB_MPIEXEC).
#include <catch2/catch.hpp>

#ifdef ATTNLAB_MPIEXEC
#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/run_compare.h"

namespace fs = std::filesystem;
using namespace attnlab::testing;

namespace {

const std::string kMpiEnv = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
const std::string kFlags = " --task reverse --vocab 5 --min-len 4 --max-len 6 --d-model 16 --layers 1 --d-ff 32"
                           " --batch-size 4 --threads 1 --quiet";

// `mpirun ... SPEC`, where SPEC is "-np N PROGRAM ARGS", or several of them
// joined by " : " (rank by rank); killed after 120 s, so a hang fails.
CliResult mpirun(const std::string& spec) {
  return run_executable("timeout -s KILL 120 " + std::string(ATTNLAB_MPIEXEC), "--oversubscribe " + spec, kMpiEnv);
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

TEST_CASE("under mpirun a refusal that only rank 1 meets reaches the user as its own line, once, with exit 2, and "
          "leaves no run directory", "[mpi][refusals]") {
  TempDir dir("mpi-rank1-refusal");
  const std::string run = dir / "run", common = " train" + kFlags + " --heldout 30 --steps 2 --run " + run;
  // One process given --heads 3 (which does not divide --d-model 16) says what rank 1 must.
  const CliResult alone = run_attnlab(common.substr(1) + " --heads 3");
  REQUIRE(alone.code == 2);
  const std::string line = first_line(alone.out);
  REQUIRE(line.rfind("attnlab train: ", 0) == 0);
  const CliResult r = mpirun("-np 1 " + std::string(ATTNLAB_EXE) + common + " --heads 2 : -np 1 " +
                             std::string(ATTNLAB_EXE) + common + " --heads 3");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find(line) != std::string::npos);
  CHECK(r.out.find(line) == r.out.rfind(line));
  CHECK(r.out.find("stoi") == std::string::npos);
  CHECK_FALSE(fs::exists(run));
}

TEST_CASE("a Ctrl-C to mpirun reaches the ranks as SIGTERM, the step is checkpointed, rank 0 says so, and the "
          "resume command and config.ini's repeat command start with mpirun -np 2", "[mpi][signals]") {
  TempDir dir("mpi-ctrl-c");
  const std::string run = dir / "run", log = dir / "log.txt";
  std::vector<std::string> argv = {ATTNLAB_MPIEXEC, "--oversubscribe", "-np", "2", ATTNLAB_EXE};
  for (const std::string& w : words("train" + kFlags + " --heads 2 --heldout 30 --steps 1000000 --eval-every 20 --run " + run))
    argv.push_back(w);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  Child job{spawn_program(argv, log)};
  wait_until(job.pid, [&] { return fs::exists(checkpoint_stem(run, 20) + ".safetensors"); });
  REQUIRE(::kill(job.pid, SIGINT) == 0);
  job.wait(60);  // Open MPI's mpirun ends with 1 when it is signalled, whatever the ranks say (docs/distributed.md)
  const std::string out = slurp(log);
  INFO(out);
  // mpirun signals every rank; rank 1 may take its SIGTERM a step before rank 0 takes its own, and
  // rank 0 then stops with it, having seen none: both are the truth, and either is said once.
  std::string said = "interrupted by SIGTERM (mpirun sends it for a Ctrl-C too) after step ";
  if (out.find(said) == std::string::npos) said = "interrupted by a signal to another process of the run after step ";
  REQUIRE(out.find(said) != std::string::npos);
  CHECK(out.find(said) == out.rfind(said));
  CHECK(out.find("; checkpoint written. Resume with: mpirun -np 2 attnlab train --resume " + run + " --steps 1000000") !=
        std::string::npos);
  const int64_t step = std::stoll(out.substr(out.find(said) + said.size()));
  CHECK(fs::exists(checkpoint_stem(run, static_cast<int>(step)) + ".optim.safetensors"));
  CHECK(first_line(slurp(run + "/config.ini")) ==
        "# attnlab train: resolved options; repeat with  mpirun -np 2 attnlab train --config " + run +
            "/config.ini --run NEW_DIR");
}

TEST_CASE("under mpirun a signal at any of ten instants of rank 0 (its claim, its files, a step, a held-out batch) "
          "is continued by the command it prints to the files of the job that was never stopped",
          "[mpi][signals][instants]") {
  TempDir dir("mpi-instants");
  const std::string run = dir / "run", reference = dir / "reference";
  const std::string faults = ATTNLAB_FAULTS_EXE;
  const std::string args = " train" + kFlags + " --heads 2 --heldout 520 --steps 5 --eval-every 2 --log-every 2"
                           " --keep 1 --run " + run;
  auto job = [&](const std::string& rank0_env) {
    return mpirun("-np 1 env " + rank0_env + " " + faults + args + " : -np 1 " + faults + args);
  };
  const CliResult counted = job("ATTNLAB_DEBUG_COUNT_POINTS=1");
  INFO(counted.out);
  REQUIRE(counted.code == 0);
  const size_t at = counted.out.find("test points: ");
  REQUIRE(at != std::string::npos);
  const long long points = std::stoll(counted.out.substr(at + 13));
  REQUIRE(points >= 10);
  fs::rename(run, reference);
  for (int i = 0; i < 10; ++i) {
    const long long k = 1 + i * (points - 1) / 9;
    const CliResult r = job("ATTNLAB_DEBUG_SIGNAL_AT=" + std::to_string(k));
    INFO("SIGINT at rank 0's test point " << k << " of " << points << ": " << r.out);
    const size_t resume = r.out.find("Resume with: mpirun -np 2 attnlab train ");
    if (r.code != 0) {  // 0: the signal came after the last file
      REQUIRE(resume != std::string::npos);
      const std::string command = first_line(r.out.substr(resume + 26));
      const CliResult resumed = mpirun("-np 2 " + std::string(ATTNLAB_EXE) + command.substr(7));
      INFO(resumed.out);
      REQUIRE(resumed.code == 0);
    }
    CHECK(run_difference(reference, run) == "");
    fs::remove_all(run);
  }
}
#endif
