// Data-parallel training under real `mpirun` jobs: N processes give the bits
// of one process accumulating N micro-batches, a checkpoint does not depend
// on N, rank 0 alone writes and prints, bad input is refused once, and a stop
// on one rank (a signal, a kill) stops them all. These run when CMake found
// MPI (ATTNLAB_MPIEXEC); a build without MPI (the sanitizer run's) has the
// one-process stand-in alone and runs the test of its refusal instead.
#include <catch2/catch.hpp>

#include <cmath>

#ifndef ATTNLAB_MPIEXEC
#include "tests/cli_harness.h"

// A build without MPI has only the one-process stand-in: started as one of N
// processes (the launcher's variables say so) it refuses, instead of
// training N independent runs that race on one directory.
TEST_CASE("a build without MPI started as one of 2 processes refuses with one line and exit 2, writing nothing",
          "[mpi]") {
  attnlab::testing::TempDir dir("nompi");
  const auto r = attnlab::testing::run_attnlab("train --task reverse --steps 2 --run " + (dir / "run"),
                                               "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out == "attnlab train: this attnlab was built without MPI, so it cannot train as one of 2 processes; "
                 "install libopenmpi-dev and rebuild, or run it without mpirun\n");
  CHECK_FALSE(std::filesystem::exists(dir / "run"));
}
#else
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "bench/cpu_info.h"
#include "tests/child_process.h"
#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::checkpoint_difference;
using attnlab::testing::checkpoint_stem;
using attnlab::testing::require_same_run;
using attnlab::testing::CliResult;
using attnlab::testing::metrics_without_times;
using attnlab::testing::run_attnlab;
using attnlab::testing::run_executable;
using attnlab::testing::slurp;
using attnlab::testing::TempDir;

namespace {

// As root, Open MPI needs both variables; more ranks than cores need --oversubscribe.
const std::string kMpiEnv = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
const std::string kModel =
    " --task reverse --vocab 5 --min-len 4 --max-len 6 --d-model 16 --heads 2 --layers 1 --d-ff 32 --heldout 30"
    " --target 0 --log-every 5 --dropout 0.1 --quiet";
const std::string kFlags = kModel + " --eval-every 10 --batch-size 12";

CliResult mpirun(int np, const std::string& args) {
  return run_executable(ATTNLAB_MPIEXEC, "--oversubscribe -np " + std::to_string(np) + " " + ATTNLAB_EXE + " " + args,
                        kMpiEnv);
}

// A refusal that one rank alone meets (rank 0 claims and locks the run
// directory and checks a resumed run's files) is decided by every rank: each
// case ends (a hang would meet the timeout: exit 137) with exit 2 and its
// line printed once, by rank 0, before any rank ends.
CliResult mpirun_refused(const std::string& args) {
  const CliResult r = run_executable("timeout -s KILL 120 " + std::string(ATTNLAB_MPIEXEC),
                                     "--oversubscribe -np 2 " + std::string(ATTNLAB_EXE) + " " + args, kMpiEnv);
  return r;
}

void check_refused_once(const CliResult& r, const std::string& line) {
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find(line) != std::string::npos);
  CHECK(r.out.find(line) == r.out.rfind(line));
}

}  // namespace

TEST_CASE("mpirun -np 2 and -np 3 give byte-identical checkpoints and metrics to --grad-accum 2 and 3 on one process",
          "[mpi]") {
  TempDir dir("mpi-bitwise");
  for (int n : {2, 3}) {
    const std::string ranks = dir / ("np" + std::to_string(n)), one = dir / ("accum" + std::to_string(n));
    const CliResult r = mpirun(n, "train" + kFlags + " --steps 30 --run " + ranks);
    INFO(r.out);
    REQUIRE(r.code == 0);
    REQUIRE(run_attnlab("train" + kFlags + " --steps 30 --grad-accum " + std::to_string(n) + " --run " + one).code == 0);
    require_same_run(ranks, one, 30);
  }
  // And the split matters: one micro-batch of 12 is another run (a reduction that ignored
  // the other ranks, or an accumulation that ignored K, would make these equal).
  const std::string whole = dir / "whole";
  REQUIRE(run_attnlab("train" + kFlags + " --steps 30 --run " + whole).code == 0);
  CHECK(checkpoint_difference(checkpoint_stem(whole, 30) + ".safetensors", checkpoint_stem(dir / "np2", 30) + ".safetensors") != "");
}

TEST_CASE("mpirun -np 2 --threads 2 (each process's threads running batch slices) gives the bits of one process "
          "with --grad-accum 4, with either reduction and a sharded optimizer",
          "[mpi][thread-slices]") {
  TempDir dir("mpi-threads");
  const std::string one = dir / "accum4";
  REQUIRE(run_attnlab("train" + kFlags + " --steps 20 --threads 1 --grad-accum 4 --run " + one).code == 0);
  for (const std::string way : {"gather", "reduce-scatter"}) {
    const std::string ranks = dir / ("np2-threads2-" + way);
    const CliResult r =
        mpirun(2, "train" + kFlags + " --steps 20 --threads 2 --shard-optimizer --reduction " + way + " --run " + ranks);
    INFO(r.out);
    REQUIRE(r.code == 0);
    require_same_run(ranks, one, 20);
  }
}

TEST_CASE("both reductions, gather and reduce-scatter, with and without --shard-optimizer, give the bits of one "
          "process with --grad-accum N*K at N = 2 to 5 (oversubscribed), with a parameter count no N divides",
          "[mpi][reduction]") {
  TempDir dir("mpi-reductions");
  // d = 18: 3,011 parameters, a prime to 2, 3, 4 and 5, so the slices differ in size.
  const std::string flags = " --task reverse --vocab 5 --min-len 4 --max-len 6 --d-model 18 --heads 2 --layers 1"
                            " --d-ff 32 --heldout 30 --target 0 --dropout 0.1 --quiet --batch-size 120 --steps 3"
                            " --eval-every 3 --log-every 1";
  const std::vector<std::pair<int, int>> splits = {{2, 1}, {2, 2}, {3, 2}, {4, 1}, {4, 2}, {5, 1}};
  for (const auto& [n, k] : splits) {
    const std::string one = dir / ("one-" + std::to_string(n * k));
    if (!fs::exists(one))
      REQUIRE(run_attnlab("train" + flags + " --grad-accum " + std::to_string(n * k) + " --run " + one).code == 0);
    for (const std::string way : {"gather", "reduce-scatter"})
      for (const std::string shard : {"", " --shard-optimizer"}) {
        const std::string ranks =
            dir / (way + "-" + std::to_string(n) + "x" + std::to_string(k) + (shard.empty() ? "" : "-sharded"));
        const CliResult r = mpirun(n, "train" + flags + " --grad-accum " + std::to_string(k) + " --reduction " + way +
                                          shard + " --run " + ranks);
        INFO(way << shard << " at N = " << n << ", K = " << k << ": " << r.out);
        REQUIRE(r.code == 0);
        require_same_run(ranks, one, 3);
        const nlohmann::json summary = attnlab::testing::read_summary(ranks);
        REQUIRE(summary["parameters"] == 3011);
        CHECK(summary["processes"] == n);
        if (way == "gather" && shard.empty()) {  // K = 1 or 2: one partial sum per rank, all of it to every rank
          const double p_bytes = 4.0 * 3011, stats = 5 * 8.0 * (n - 1) * k;  // 5 doubles per micro-batch of the others
          CHECK(summary["comm_bytes_received_per_step"].get<double>() == (n - 1) * p_bytes + stats);
        }
      }
  }
}

TEST_CASE("reduce-scatter receives at most 1.1 x 2(N-1)/N of the gradient per rank at N = 4 and 8, with or without "
          "--shard-optimizer, and a sharded optimizer holds at most 1.1/N of the state", "[mpi][reduction]") {
  TempDir dir("mpi-bytes");
  // 150,629 parameters: slices within half an optimizer chunk (1,024 elements) of P/N.
  const std::string flags = " --task reverse --vocab 5 --min-len 4 --max-len 6 --d-model 96 --heads 2 --layers 2"
                            " --d-ff 192 --heldout 16 --target 0 --quiet --batch-size 16 --steps 2 --eval-every 2"
                            " --reduction reduce-scatter";
  for (int n : {4, 8})
    for (const std::string shard : {"", " --shard-optimizer"}) {
      const std::string run = dir / (std::to_string(n) + (shard.empty() ? "" : "-sharded"));
      const CliResult r = mpirun(n, "train" + flags + shard + " --run " + run);
      INFO("N = " << n << shard << ": " << r.out);
      REQUIRE(r.code == 0);
      const nlohmann::json summary = attnlab::testing::read_summary(run);
      const double p_bytes = 4.0 * summary["parameters"].get<double>();
      const double received = summary["comm_bytes_received_per_step"].get<double>();
      CHECK(received <= 1.1 * 2 * (n - 1) / n * p_bytes);
      CHECK(received >= 0.9 * 2 * (n - 1) / n * p_bytes);
      CHECK(summary["comm_bytes_per_step"].get<double>() ==
            received + summary["comm_bytes_sent_per_step"].get<double>());
      CHECK(summary["comm_seconds_per_step"].get<double>() > 0);
      const double state = summary["optimizer_state_bytes"].get<double>();
      if (shard.empty())
        CHECK(state == 2 * p_bytes);  // AdamW: two buffers of P
      else
        CHECK(state <= 1.1 * 2 * p_bytes / n);
    }
}

TEST_CASE("with two partial sums per process (N = 2, K = 3) --reduction reduce-scatter receives about 1.5 P floats "
          "per rank and the gather 2 P: each way is the one asked for", "[mpi][reduction]") {
  TempDir dir("mpi-bytes-two-partials");
  // At N = 2 with one partial sum per rank the two ways receive the same P floats; with K = 3 rank 0
  // sends {0, 1} and {2}: the gather brings it rank 1's two whole partial sums, the reduce-scatter
  // their parts of its slice (about P/2 each) and the other slice (about P/2).
  const std::string flags = " --task reverse --vocab 5 --min-len 4 --max-len 6 --d-model 96 --heads 2 --layers 2"
                            " --d-ff 192 --heldout 16 --target 0 --quiet --batch-size 18 --grad-accum 3 --steps 1"
                            " --eval-every 1";
  std::map<std::string, double> received;
  double p_bytes = 0;
  for (const std::string way : {"gather", "reduce-scatter"}) {
    const std::string run = dir / way;
    const CliResult r = mpirun(2, "train" + flags + " --reduction " + way + " --run " + run);
    INFO(way << ": " << r.out);
    REQUIRE(r.code == 0);
    const nlohmann::json summary = attnlab::testing::read_summary(run);
    p_bytes = 4.0 * summary["parameters"].get<double>();
    received[way] = summary["comm_bytes_received_per_step"].get<double>();
  }
  CHECK(received["gather"] >= 2 * p_bytes);
  CHECK(received["gather"] <= 2.01 * p_bytes);
  CHECK(received["reduce-scatter"] >= 1.4 * p_bytes);
  CHECK(received["reduce-scatter"] <= 1.6 * p_bytes);
}

TEST_CASE("a checkpoint does not depend on the process count: -np 2 resumes on one process with --grad-accum 2, "
          "-np 3 x 2 on -np 2 x 3, bitwise the uninterrupted run", "[mpi][resume]") {
  TempDir dir("mpi-resume");
  const std::string whole = dir / "whole", split = dir / "split";
  REQUIRE(mpirun(2, "train" + kFlags + " --steps 30 --run " + whole).code == 0);
  REQUIRE(mpirun(2, "train" + kFlags + " --steps 20 --run " + split).code == 0);
  const CliResult r = run_attnlab("train --resume " + split + " --steps 30 --grad-accum 2 --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  require_same_run(whole, split, 30);

  const std::string six = dir / "six", mixed = dir / "mixed";
  REQUIRE(run_attnlab("train" + kFlags + " --steps 30 --grad-accum 6 --run " + six).code == 0);
  REQUIRE(mpirun(3, "train" + kFlags + " --steps 20 --grad-accum 2 --run " + mixed).code == 0);
  REQUIRE(mpirun(2, "train --resume " + mixed + " --steps 30 --grad-accum 3 --quiet").code == 0);
  require_same_run(six, mixed, 30);
}

TEST_CASE("a run resumes across N and across --shard-optimizer bitwise: 4 x 1 sharded, then 2 x 2 sharded, then one "
          "process of 4, and 2 x 3 unsharded, then 3 x 2 sharded", "[mpi][resume][shard]") {
  TempDir dir("mpi-resume-sharded");
  const std::string four = dir / "four", chain = dir / "chain";
  REQUIRE(run_attnlab("train" + kFlags + " --steps 30 --grad-accum 4 --run " + four).code == 0);
  CliResult r = mpirun(4, "train" + kFlags + " --steps 10 --shard-optimizer --run " + chain);
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(mpirun(2, "train --resume " + chain + " --steps 20 --grad-accum 2 --shard-optimizer --quiet").code == 0);
  REQUIRE(run_attnlab("train --resume " + chain + " --steps 30 --grad-accum 4 --quiet").code == 0);
  require_same_run(four, chain, 30);

  const std::string six = dir / "six", mixed = dir / "mixed";
  REQUIRE(run_attnlab("train" + kFlags + " --steps 30 --grad-accum 6 --run " + six).code == 0);
  REQUIRE(mpirun(2, "train" + kFlags + " --steps 20 --grad-accum 3 --run " + mixed).code == 0);
  r = mpirun(3, "train --resume " + mixed + " --steps 30 --grad-accum 2 --shard-optimizer --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  require_same_run(six, mixed, 30);
}

TEST_CASE("under mpirun rank 0 alone prints and writes, and a batch that does not split into the micro-batches is "
          "refused once with exit 2 before anything is written", "[mpi]") {
  TempDir dir("mpi-io");
  const std::string run = dir / "run";
  std::string flags = kFlags;
  flags.replace(flags.find(" --quiet"), 8, "");
  const CliResult r = mpirun(3, "train" + flags + " --steps 10 --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);
  size_t results = 0;
  for (size_t at = 0; (at = r.out.find("held-out exact match", at)) != std::string::npos; ++at) ++results;
  CHECK(results == 1);
  CHECK(r.out.find("task: reverse") == r.out.rfind("task: reverse"));

  const std::string bad = dir / "bad";
  const CliResult refused = mpirun(2, "train" + kModel + " --batch-size 7 --steps 10 --run " + bad);
  INFO(refused.out);
  CHECK(refused.code == 2);
  const std::string line = "--batch-size 7 does not split into 2 processes x --grad-accum 1 = 2 micro-batches";
  CHECK(refused.out.find(line) != std::string::npos);
  CHECK(refused.out.find(line) == refused.out.rfind(line));
  CHECK_FALSE(fs::exists(bad));
}

TEST_CASE("SIGTERM to one rank stops every rank after the same step, which rank 0 checkpoints, a rank killed with "
          "SIGKILL ends the job with a non-zero exit and the last checkpoint loads", "[mpi][signals]") {
  using namespace attnlab::testing;
  TempDir dir("mpi-signals");
  const std::string flags = kModel + " --batch-size 12 --steps 1000000 --eval-every 20";
  for (const int signal : {SIGTERM, SIGKILL}) {
    const std::string run = dir / (signal == SIGTERM ? "term" : "kill"), log = dir / "log.txt";
    std::vector<std::string> argv = {ATTNLAB_MPIEXEC, "--oversubscribe", "-np", "2", ATTNLAB_EXE};
    for (const std::string& w : words("train" + flags + " --run " + run)) argv.push_back(w);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    Child job{spawn_program(argv, log)};
    wait_until(job.pid, [&] { return fs::exists(checkpoint_stem(run, 40) + ".safetensors"); });
    // The ranks are mpirun's children; signal the last one listed (not rank 0 in general).
    pid_t rank = -1;
    for (const auto& entry : fs::directory_iterator("/proc")) {
      std::ifstream stat(entry.path() / "stat");
      std::string pid, name, state;
      pid_t parent = 0;
      if (stat >> pid >> name >> state >> parent && parent == job.pid) rank = std::stoi(pid);
    }
    REQUIRE(rank > 0);
    REQUIRE(::kill(rank, signal) == 0);
    const int code = job.wait(60);
    INFO(slurp(log));
    CHECK(code != 0);
    if (signal == SIGTERM) CHECK(slurp(log).find("interrupted by") != std::string::npos);
    const CliResult eval = run_attnlab("eval --run " + run);
    INFO(eval.out);
    CHECK(eval.code == 0);
  }
}
TEST_CASE("mpirun -np 2 scripts/tools/sweep.py deals the grid points to both ranks, each a normal run, rank 0 writes one "
          "table and plot, and a failed point is a row with its exit code", "[mpi][sweep]") {
  TempDir dir("mpi-sweep");
  const std::string out = dir / "sweep";
  const std::string script = std::string(ATTNLAB_TEST_DATA) + "/../../scripts/tools/sweep.py";
  // lr 1e30 passes attnlab's check (before any point runs) and fails in training (exit 1), the others train.
  const CliResult r = run_executable(
      ATTNLAB_MPIEXEC,
      "--oversubscribe -np 2 /usr/bin/python3 " + script + " --attnlab " + ATTNLAB_EXE + " --out " + out +
          " --jobs 1 --grid lr=1e-3,1e30,2e-3 -- --task reverse --vocab 5 --min-len 4 --max-len 4 --d-model 16 --layers 1"
          " --d-ff 32 --steps 10 --eval-every 10 --heldout 20",
      kMpiEnv);
  INFO(r.out);
  CHECK(r.code != 0);  // a point failed
  CHECK(r.out.find("sweep: lr1e30 failed: attnlab train: non-finite loss at step") != std::string::npos);
  std::ifstream csv(out + "/summary.csv");
  std::string header, row;
  std::getline(csv, header);
  std::vector<std::string> rows;
  while (std::getline(csv, row)) rows.push_back(row.substr(0, row.find('\r')));  // Python's csv ends lines with \r\n
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].substr(0, 11) == "lr1e30,1e30");  // the point's run name, then its grid value
  CHECK(rows[1].substr(rows[1].rfind(',') + 1) == "1");
  for (const char* point : {"lr1e-3", "lr2e-3"}) {
    CHECK(attnlab::testing::read_summary(out + "/" + point)["steps"] == 10);
    CHECK(fs::exists(out + "/" + std::string(point) + "/.attnlab-run"));
  }
  // Point i went to rank i mod 2.
  auto rank_of = [&](const std::string& name) {
    std::ifstream in(out + "/" + name + ".result.json");
    return nlohmann::json::parse(in).at("rank").get<int>();
  };
  CHECK(rank_of("lr1e-3") == 0);
  CHECK(rank_of("lr1e30") == 1);
  CHECK(rank_of("lr2e-3") == 0);
  if (std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0) CHECK(fs::exists(out + "/summary.png"));
}
TEST_CASE("a held-out evaluation shared out between processes gives the figures of one process: 600 examples in 3 "
          "batches at -np 2 and 3, and a character language model's loss", "[mpi][eval]") {
  TempDir dir("mpi-eval");
  // 600 held-out examples are 3 greedy batches of 256: rank 1 of 2 scores batch 1, rank 0 batches 0 and 2.
  std::string flags = kModel + " --eval-every 10 --batch-size 12 --steps 10";
  flags.replace(flags.find("--heldout 30"), 12, "--heldout 600");
  for (int n : {2, 3}) {
    const std::string ranks = dir / ("np" + std::to_string(n)), one = dir / ("one" + std::to_string(n));
    REQUIRE(mpirun(n, "train" + flags + " --run " + ranks).code == 0);
    REQUIRE(run_attnlab("train" + flags + " --grad-accum " + std::to_string(n) + " --run " + one).code == 0);
    const auto a = attnlab::testing::read_summary(ranks), b = attnlab::testing::read_summary(one);
    CHECK(a["heldout_examples"] == 600);
    CHECK(a["heldout_exact"] == b["heldout_exact"]);
    CHECK(a["heldout_token_acc"] == b["heldout_token_acc"]);
    CHECK(a["heldout_token_acc"].get<double>() > 0);
  }
  // A text file whose last 20% (the held-out windows) makes several batches of 64 windows.
  const std::string text = dir / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 400; ++i) out << "the quick brown fox " << i % 7 << " jumps over the lazy dog\n";
  }
  const std::string lm = " --task text --file " + text + " --model decoder --layers 1 --d-model 16 --heads 2 --d-ff 32"
                         " --seq-len 16 --batch-size 8 --steps 6 --eval-every 3 --quiet";
  REQUIRE(mpirun(2, "train" + lm + " --run " + (dir / "lm2")).code == 0);
  REQUIRE(run_attnlab("train" + lm + " --grad-accum 2 --run " + (dir / "lm1")).code == 0);
  const auto a = attnlab::testing::read_summary(dir / "lm2"), b = attnlab::testing::read_summary(dir / "lm1");
  CHECK(a["heldout_chars"].get<int64_t>() > 64 * 16);  // more than one batch of windows
  CHECK(a["heldout_loss"] == b["heldout_loss"]);
  CHECK(a["heldout_token_acc"] == b["heldout_token_acc"]);
  CHECK(metrics_without_times(dir / "lm2/metrics.csv") == metrics_without_times(dir / "lm1/metrics.csv"));
}
TEST_CASE("a NaN gradient stops every rank under --on-nan stop with one message and the last checkpoint kept, and "
          "--on-nan skip goes on to the end", "[mpi][nan]") {
  TempDir dir("mpi-nan");
  // The fault build injects the NaN into the summed gradient of step 15 on every rank alike,
  // as a NaN in any micro-batch's gradient would reach the sum on every rank.
  const std::string env = kMpiEnv + " ATTNLAB_DEBUG_NAN_AT_STEP=15";
  const std::string flags = kFlags + " --steps 30";  // checkpoints every 10 steps
  auto faults = [&](const std::string& policy, const std::string& run) {
    return run_executable(ATTNLAB_MPIEXEC, "--oversubscribe -np 2 " + std::string(ATTNLAB_FAULTS_EXE) + " train" +
                                               flags + " --on-nan " + policy + " --run " + run, env);
  };
  const CliResult stopped = faults("stop", dir / "stop");
  INFO(stopped.out);
  CHECK(stopped.code == 1);
  const std::string line = "non-finite gradient at step 15";
  CHECK(stopped.out.find(line) != std::string::npos);
  CHECK(stopped.out.find(line) == stopped.out.rfind(line));  // printed once, by rank 0
  CHECK(stopped.out.find("The last checkpoint (step 10) is kept") != std::string::npos);
  CHECK(fs::exists(checkpoint_stem(dir / "stop", 10) + ".safetensors"));
  CHECK_FALSE(fs::exists(checkpoint_stem(dir / "stop", 20) + ".safetensors"));

  const CliResult skipped = faults("skip", dir / "skip");
  INFO(skipped.out);
  CHECK(skipped.code == 0);
  CHECK(skipped.out.find("step skipped (--on-nan skip)") == skipped.out.rfind("step skipped (--on-nan skip)"));
  CHECK(attnlab::testing::read_summary(dir / "skip")["steps"] == 30);
}
TEST_CASE("under mpirun a refusal that only rank 0 meets ends every rank with exit 2 and its line printed once: a "
          "finished run trained again, a directory that is not a run, an edited config.ini on --resume",
          "[mpi][refusals]") {
  TempDir dir("mpi-refusals");
  const std::string run = dir / "run";
  const CliResult trained = mpirun_refused("train" + kFlags + " --steps 10 --run " + run);
  INFO(trained.out);
  REQUIRE(trained.code == 0);
  const std::string metrics = slurp(run + "/metrics.csv");

  check_refused_once(mpirun_refused("train" + kFlags + " --steps 10 --run " + run),
                     "run directory '" + run + "' already exists; use --resume");
  CHECK(slurp(run + "/metrics.csv") == metrics);

  fs::create_directories(dir / "mine");
  std::ofstream(dir / "mine/notes.txt") << "a user's file\n";
  check_refused_once(mpirun_refused("train" + kFlags + " --steps 10 --run " + (dir / "mine")),
                     "is not an attnlab run directory");
  CHECK(slurp(dir / "mine/notes.txt") == "a user's file\n");

  const std::string config = slurp(run + "/config.ini");
  std::string edited = config;
  edited.replace(edited.find("d-ff = 32"), 9, "d-ff = 64");
  std::ofstream(run + "/config.ini") << edited;
  check_refused_once(mpirun_refused("train --resume " + run + " --steps 20 --quiet"),
                     "config.ini gives d-ff = 64, the checkpoint was trained with 32");
  CHECK_FALSE(fs::exists(checkpoint_stem(run, 20) + ".safetensors"));
  CHECK(slurp(run + "/metrics.csv") == metrics);

  // A data file with a byte that is not UTF-8: refused by every rank at load, before the first step.
  std::ofstream(dir / "bad.txt") << std::string(200, 'a') << "\xff" << std::string(200, 'b') << "\n";
  check_refused_once(mpirun_refused("train --task text --model decoder --file " + (dir / "bad.txt") +
                                    " --seq-len 16 --d-model 16 --heads 2 --d-ff 32 --steps 10 --batch-size 4"
                                    " --threads 1 --quiet --run " + (dir / "text")),
                     "not valid UTF-8 (byte 0xFF)");
  CHECK_FALSE(fs::exists(dir / "text"));

  // Refused by every rank alike (the Trainer's check): still printed once, every time.
  for (int attempt = 0; attempt < 3; ++attempt)
    check_refused_once(mpirun_refused("train" + kFlags + " --steps 10 --probe-every 5 --run " + (dir / "probe")),
                       "--probe-every records one process's micro-batch: not with several processes");
  CHECK_FALSE(fs::exists(dir / "probe"));
  check_refused_once(mpirun_refused("train" + kFlags + " --steps 10 --probe-sharpness 5 --run " + (dir / "sharp")),
                     "--probe-sharpness probes one process's model: not with several processes");
  CHECK_FALSE(fs::exists(dir / "sharp"));
  check_refused_once(mpirun_refused("train" + kFlags + " --model decoder --steps 10 --probe-induction 5 --run " +
                                    (dir / "induction")),
                     "--probe-induction probes one process's model: not with several processes");
  CHECK_FALSE(fs::exists(dir / "induction"));
}

TEST_CASE("mpirun -np 2 attnlab eval, predict and report refuse once instead of printing twice: one line, exit 2, "
          "every rank ends",
          "[mpi]") {
  TempDir dir("mpi-readers");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kFlags + " --steps 10 --run " + run).code == 0);
  const std::string line = "this command runs as one process, not as 2 under mpirun; run it without mpirun";
  for (const std::string& command : {"eval --run " + run, "predict --run " + run + " \"1 2 3 4\"", "report " + run})
    check_refused_once(mpirun_refused(command), line);
  CHECK_FALSE(fs::exists(run + "/report.html"));
}

TEST_CASE("under mpirun a run in use is refused by every rank: a second job on a live run, with --overwrite, with "
          "--resume, and of two jobs started together on one new directory one trains and one is refused",
          "[mpi][refusals]") {
  using namespace attnlab::testing;
  TempDir dir("mpi-live");
  const std::string live = dir / "live";
  std::vector<std::string> argv = {ATTNLAB_MPIEXEC, "--oversubscribe", "-np", "2", ATTNLAB_EXE};
  for (const std::string& w : words("train" + kFlags + " --steps 1000000 --run " + live))
    argv.push_back(w);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  Child job{spawn_program(argv, dir / "live.log")};
  wait_until(job.pid, [&] { return fs::exists(checkpoint_stem(live, 20) + ".safetensors"); });
  const std::string in_use = "run directory '" + live + "' is in use by attnlab process";
  check_refused_once(mpirun_refused("train" + kFlags + " --steps 10 --run " + live), in_use);
  check_refused_once(mpirun_refused("train" + kFlags + " --steps 10 --overwrite --run " + live), in_use);
  check_refused_once(mpirun_refused("train --resume " + live + " --steps 2000000"), in_use);
  REQUIRE(::kill(job.pid, SIGTERM) == 0);
  job.wait(60);
  const CliResult eval = run_attnlab("eval --run " + live);  // the live run was left alone
  INFO(eval.out);
  CHECK(eval.code == 0);

  // Two jobs at once on one new directory: the loser meets the winner's lock or its finished run.
  const std::string both = dir / "both", cmd = "train" + kFlags + " --steps 30 --run " + both;
  CliResult first, second;
  std::thread other([&] { second = mpirun_refused(cmd); });
  first = mpirun_refused(cmd);
  other.join();
  INFO(first.out << "\n---\n" << second.out);
  CHECK(std::min(first.code, second.code) == 0);
  CHECK(std::max(first.code, second.code) == 2);
  const std::string& loser = first.code == 2 ? first.out : second.out;
  const bool locked = loser.find("is in use by attnlab process") != std::string::npos;
  const bool exists = loser.find("already exists; use --resume") != std::string::npos;
  CHECK((locked || exists));
  CHECK(attnlab::testing::read_summary(both)["steps"] == 30);
}

TEST_CASE("under mpirun -np 2 rank 0 writes a modular run's embedding_fourier.csv, the rows of one process with "
          "--grad-accum 2", "[mpi]") {
  TempDir dir("mpi-fourier");
  const std::string flags = " --task modular --modulus 7 --d-model 16 --heads 2 --layers 1 --d-ff 32 --batch-size 8"
                            " --eval-every 2 --steps 4 --target 0 --threads 1 --quiet --run ";
  const CliResult r = mpirun(2, "train" + flags + (dir / "np2"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(run_attnlab("train" + flags + (dir / "accum2") + " --grad-accum 2").code == 0);
  const std::string rows = slurp(dir / "np2/embedding_fourier.csv");
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 1 + 2 * 4);  // steps 2 and 4 x k = 0..3
  CHECK(rows == slurp(dir / "accum2/embedding_fourier.csv"));
}

TEST_CASE("an error after the first step that one rank alone meets ends every rank: its line printed once, a non-zero "
          "exit, and the run directory kept", "[mpi][refusals]") {
  TempDir dir("mpi-fault");
  for (const std::string rank : {"0", "1"}) {
    const std::string run = dir / ("run" + rank);
    const CliResult r = run_executable(
        "timeout -s KILL 120 " + std::string(ATTNLAB_MPIEXEC),
        "--oversubscribe -np 2 " + std::string(ATTNLAB_FAULTS_EXE) + " train" + kFlags + " --steps 30 --run " + run,
        kMpiEnv + " ATTNLAB_DEBUG_THROW_AT_STEP=15 ATTNLAB_DEBUG_THROW_RANK=" + rank);
    INFO(r.out);
    CHECK(r.code == 1);  // the code of the failing rank, through MPI_Abort; not 137, a hang killed
    const std::string line = "attnlab train: internal error: injected fault after step 15 on rank " + rank;
    CHECK(r.out.find(line) != std::string::npos);
    CHECK(r.out.find(line) == r.out.rfind(line));
    CHECK(fs::exists(run + "/config.ini"));
    CHECK(fs::exists(checkpoint_stem(run, 10) + ".safetensors"));
  }
}

TEST_CASE("bench --comm under mpirun -np 2 prints one JSON line: the CPU, and each collective's times by size with "
          "its alpha and beta", "[mpi][bench]") {
  const CliResult r = mpirun(2, "bench --comm --steps 3");
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 1);  // rank 0 alone prints
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["processes"] == 2);
  CHECK(j["cpu"] == attnlab::bench::cpu_info().model_name);
  CHECK(j["cpu_family"] == attnlab::bench::cpu_info().family);
  for (const char* collective : {"allgatherv", "alltoallv"}) {
    INFO(collective);
    const auto& c = j[collective];
    REQUIRE(c["sizes"].size() >= 2);
    double bytes = 0;
    for (const auto& size : c["sizes"]) {
      CHECK(size["bytes_received"].get<double>() > bytes);  // growing sizes
      CHECK(size["seconds"].get<double>() > 0);
      bytes = size["bytes_received"].get<double>();
    }
    CHECK(c["alpha_s"] == c["sizes"][0]["seconds"]);
    CHECK(c["gbit_per_s"].get<double>() == Approx(8 / c["beta_s_per_byte"].get<double>() / 1e9));
  }
}
#endif
