// Run directories that are safe, end to end through the attnlab executable:
// --overwrite replaces only a marked attnlab run (never a user's directory,
// the working directory, a parent of it or $HOME), one process at a time
// trains in a run (an flock that a killed process does not keep), a run that
// fails before its first checkpoint leaves nothing behind, and a stub left by
// a killed run says how to start it again. Also scripts/tools/sweep.py's flags.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/child_process.h"
#include "tests/cli_harness.h"

namespace fs = std::filesystem;
using attnlab::testing::Child;
using attnlab::testing::CliResult;
using attnlab::testing::read_summary;
using attnlab::testing::run_attnlab;
using attnlab::testing::slurp;
using attnlab::testing::TempDir;
using Catch::Matchers::Contains;

namespace {

// A task and model that train in milliseconds a step; width and heads left to
// each test. --target 0: a run stops at --steps, never early because it is solved.
const std::string kShape = " --task reverse --vocab 6 --min-len 5 --max-len 5 --layers 1 --d-ff 64 --batch-size 32"
                           " --heldout 200 --target 0";
const std::string kTiny = kShape + " --d-model 32 --heads 2 --threads 1 --quiet";

int64_t lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

// Runs `command` through the shell (stderr into the output): for runs from another working directory.
CliResult shell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Every entry under `dir`, path -> content ("<dir>" for directories): "nothing was touched".
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    out[entry.path().string()] = entry.is_directory() ? "<dir>" : slurp(entry.path().string());
  return out;
}

std::vector<int64_t> checkpoint_steps(const std::string& run) {
  std::vector<int64_t> steps;
  if (!fs::is_directory(run + "/checkpoints")) return steps;
  for (const auto& entry : fs::directory_iterator(run + "/checkpoints")) {
    const std::string name = entry.path().filename().string();
    long long step = 0;
    char tail[32] = {0};
    if (std::sscanf(name.c_str(), "step-%lld.%31s", &step, tail) == 2 && std::string(tail) == "optim.safetensors")
      steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void train_run(const std::string& run, int64_t steps) {
  CliResult r = run_attnlab("train" + kTiny + " --steps " + std::to_string(steps) + " --eval-every 2 --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);
}

}  // namespace

TEST_CASE("train --overwrite refuses a directory that is not a marked attnlab run, the working directory, a parent of it "
          "and $HOME, with one line naming the path and nothing touched",
          "[cli][run-safety]") {
  TempDir dir("safety-refuse");
  auto refused = [](const CliResult& r, const std::string& path, const std::string& why) {
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(lines(r.out) == 1);
    CHECK_THAT(r.out, Contains("'" + path + "'"));
    CHECK_THAT(r.out, Contains(why));
  };
  const std::string overwrite = "train" + kTiny + " --steps 2 --overwrite --run ";

  const std::string user = dir / "mydata";
  write(user + "/notes.txt", "mine\n");
  write(user + "/sub/table.csv", "a,b\n1,2\n");
  auto before = snapshot(user);
  refused(run_attnlab(overwrite + user), user, "not an attnlab run directory");
  CHECK(snapshot(user) == before);

  // A run of an older attnlab: config.ini and checkpoints, but no marker.
  const std::string legacy = dir / "legacy";
  train_run(legacy, 2);
  fs::remove(legacy + "/.attnlab-run");
  before = snapshot(legacy);
  refused(run_attnlab(overwrite + legacy), legacy, "no .attnlab-run marker");
  CHECK(snapshot(legacy) == before);

  // A complete marked run, which --overwrite would replace by another path.
  const std::string run = dir / "run";
  train_run(run, 2);
  CHECK(fs::exists(run + "/.attnlab-run"));
  fs::create_directories(run + "/notes/deep");  // a user's folders in the run: parents further up than ..
  before = snapshot(run);
  const std::string exe = std::string(ATTNLAB_EXE) + " ";
  refused(shell("cd '" + run + "' && " + exe + overwrite + "."), ".", "it is the working directory");
  refused(shell("cd '" + run + "/checkpoints' && " + exe + overwrite + ".."), "..", "a parent of the working directory");
  refused(shell("cd '" + run + "/notes/deep' && " + exe + overwrite + "../.."), "../..",
          "a parent of the working directory");
  refused(shell("HOME='" + run + "' " + exe + overwrite + run), run, "the home directory");
  refused(shell("HOME='" + run + "/notes/deep' " + exe + overwrite + run), run, "a parent of the home directory");
  CHECK(snapshot(run) == before);
}

TEST_CASE("train --overwrite replaces a marked run in place: its checkpoints and metrics go, files the user added stay",
          "[cli][run-safety]") {
  TempDir dir("safety-replace");
  const std::string run = dir / "run";
  train_run(run, 6);
  REQUIRE(checkpoint_steps(run) == std::vector<int64_t>{2, 4, 6});
  write(run + "/notes.txt", "what I tried\n");
  write(run + "/plots/loss.png", "png bytes");
  // Temporaries a killed write leaves (".NAME.tmp.XXXXXX", write_file_atomic's) are attnlab's when NAME is;
  // one named after a file of the user's is not.
  write(run + "/.metrics.csv.tmp.Ab12Cd", "half a row");
  write(run + "/checkpoints/.step-00000004.safetensors.tmp.Xy34Zw", "half a checkpoint");
  write(run + "/.notes.txt.tmp.Qr56St", "the user's");
  write(run + "/checkpoints/which-is-best.txt", "step 4");  // checkpoints/ then stays, with it

  CliResult r = run_attnlab("train" + kTiny + " --steps 2 --eval-every 2 --overwrite --run " + run);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_FALSE(fs::exists(run + "/.metrics.csv.tmp.Ab12Cd"));
  CHECK_FALSE(fs::exists(run + "/checkpoints/.step-00000004.safetensors.tmp.Xy34Zw"));
  CHECK(slurp(run + "/.notes.txt.tmp.Qr56St") == "the user's");
  CHECK(slurp(run + "/checkpoints/which-is-best.txt") == "step 4");
  CHECK(checkpoint_steps(run) == std::vector<int64_t>{2});
  CHECK(read_summary(run)["steps"] == 2);
  CHECK(lines(slurp(run + "/metrics.csv")) <= 3);  // header and the new run's rows, none of the 6-step run's
  CHECK(slurp(run + "/notes.txt") == "what I tried\n");
  CHECK(slurp(run + "/plots/loss.png") == "png bytes");
}

TEST_CASE("a live run's lock refuses a second train --resume, --overwrite or new run on it at once with exit 2 naming "
          "its pid, and after kill -9 the lock never blocks a resume",
          "[cli][run-safety][lock]") {
  TempDir dir("safety-lock");
  const std::string run = dir / "run";
  Child first("train" + kTiny + " --steps 1000000 --eval-every 5 --run " + run, dir / "first.log");
  first.wait_until([&] { return !checkpoint_steps(run).empty(); });
  const std::string holder = "process " + std::to_string(first.pid);
  CHECK_THAT(slurp(run + "/.lock"), Contains("pid " + std::to_string(first.pid)));

  const std::vector<std::string> second = {
      "train --resume " + run + " --steps 2000000 --threads 1 --quiet",
      "train" + kTiny + " --steps 2 --overwrite --run " + run,
      "train" + kTiny + " --steps 2 --run " + run,
  };
  for (size_t i = 0; i < second.size(); ++i) {
    const std::string log = dir / ("second" + std::to_string(i) + ".log");
    Child other(second[i], log);
    const int code = other.wait();
    INFO(second[i] << " -> " << slurp(log));
    CHECK(code == 2);
    CHECK_THAT(slurp(log), Contains("in use by attnlab " + holder));
    CHECK(lines(slurp(log)) == 1);
  }
  CHECK(first.kill9() == 128 + SIGKILL);
  REQUIRE(fs::exists(run + "/.lock"));  // the killed holder's file stays; its flock does not
  const int64_t last = checkpoint_steps(run).back();
  CliResult resumed =
      run_attnlab("train --resume " + run + " --steps " + std::to_string(last + 2) + " --threads 1 --quiet");
  INFO(resumed.out);
  CHECK(resumed.code == 0);
  CHECK(read_summary(run)["steps"] == last + 2);

  // A live run that replaced a finished one with --overwrite holds the lock as a new run does.
  Child replacing("train" + kTiny + " --steps 1000000 --eval-every 5 --overwrite --run " + run, dir / "replacing.log");
  replacing.wait_until([&] { return !fs::exists(run + "/summary.json") && !checkpoint_steps(run).empty(); });
  Child other("train --resume " + run + " --steps 2000000 --threads 1 --quiet", dir / "other.log");
  CHECK(other.wait() == 2);
  CHECK_THAT(slurp(dir / "other.log"), Contains("in use by attnlab process " + std::to_string(replacing.pid)));
  CHECK(replacing.kill9() == 128 + SIGKILL);
}

TEST_CASE("train --resume on a run being replaced in place (its lock held, config.ini not yet rewritten) names the "
          "holder, not a missing config.ini",
          "[cli][run-safety][lock]") {
  TempDir dir("safety-lock-replacing");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kTiny + " --steps 2 --eval-every 2 --run " + run).code == 0);
  fs::remove(run + "/config.ini");  // the moment a replacing run has cleared the old files
  const int fd = ::open((run + "/.lock").c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const std::string pid_line = "pid " + std::to_string(::getpid()) + "\n";  // a live pid, as a replacing run's
  REQUIRE(::pwrite(fd, pid_line.data(), pid_line.size(), 0) == static_cast<ssize_t>(pid_line.size()));
  const CliResult held = run_attnlab("train --resume " + run + " --steps 4 --threads 1 --quiet");
  INFO(held.out);
  CHECK(held.code == 2);
  CHECK_THAT(held.out, Contains("in use by attnlab process " + std::to_string(::getpid())));
  ::close(fd);  // released: the directory is then what it is, a run without config.ini
  const CliResult free = run_attnlab("train --resume " + run + " --steps 4 --threads 1 --quiet");
  INFO(free.out);
  CHECK(free.code != 0);
  CHECK_THAT(free.out, Contains("is not an attnlab run directory (no config.ini)"));
}

TEST_CASE("a run's .lock that is a symlink or a FIFO is refused by --resume and --overwrite, and what it points to is "
          "left as it was", "[cli][run-safety][lock]") {
  TempDir dir("safety-lock-kind");
  const std::string run = dir / "run", target = dir / "precious.txt";
  REQUIRE(run_attnlab("train" + kTiny + " --steps 2 --eval-every 2 --run " + run).code == 0);
  { std::ofstream(target) << "the user's own words\n"; }
  fs::remove(run + "/.lock");
  fs::create_symlink(target, run + "/.lock");
  for (const std::string& command : {"train --resume " + run + " --steps 4 --threads 1 --quiet",
                                     "train" + kTiny + " --steps 2 --overwrite --run " + run}) {
    const CliResult r = run_attnlab(command);
    INFO(command << " -> " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains(run + "/.lock is a symlink, not attnlab's lock file"));
    CHECK(slurp(target) == "the user's own words\n");
  }
  fs::remove(run + "/.lock");
  REQUIRE(::mkfifo((run + "/.lock").c_str(), 0644) == 0);
  const CliResult r = run_attnlab("train --resume " + run + " --steps 4 --threads 1 --quiet");  // O_NONBLOCK: no hang
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains(run + "/.lock is not a regular file"));
}

TEST_CASE("two new runs started at once on one directory: exactly one trains, the other exits 2", "[cli][run-safety][lock]") {
  TempDir dir("safety-race");
  for (int trial = 0; trial < 4; ++trial) {
    const std::string run = dir / ("run" + std::to_string(trial));
    const std::string args = "train" + kTiny + " --steps 20 --eval-every 10 --log-every 1 --run " + run;
    Child a(args, dir / "a.log"), b(args, dir / "b.log");
    std::vector<int> codes = {a.wait(), b.wait()};
    INFO("trial " << trial << "\na: " << slurp(dir / "a.log") << "\nb: " << slurp(dir / "b.log"));
    std::sort(codes.begin(), codes.end());
    CHECK(codes == std::vector<int>{0, 2});
    CHECK(read_summary(run)["steps"] == 20);
    CHECK(lines(slurp(run + "/metrics.csv")) == 21);  // one run's rows only
  }
}

TEST_CASE("a run killed before its first checkpoint: --resume and a new train name --overwrite, which replaces the stub",
          "[cli][run-safety]") {
  TempDir dir("safety-stub");
  const std::string run = dir / "run";
  {
    Child killed("train" + kTiny + " --steps 1000000 --eval-every 1000000 --log-every 1 --run " + run, dir / "killed.log");
    killed.wait_until([&] { return lines(slurp(run + "/metrics.csv")) >= 2; });
    killed.kill9();
  }
  REQUIRE(checkpoint_steps(run).empty());

  CliResult resume = run_attnlab("train --resume " + run + " --steps 10 --threads 1 --quiet");
  INFO(resume.out);
  CHECK(resume.code == 2);
  CHECK(lines(resume.out) == 1);
  CHECK_THAT(resume.out, Contains("no checkpoint yet") && Contains("--overwrite"));

  CliResult fresh = run_attnlab("train" + kTiny + " --steps 2 --run " + run);
  INFO(fresh.out);
  CHECK(fresh.code == 2);
  CHECK(lines(fresh.out) == 1);
  CHECK_THAT(fresh.out, Contains("--overwrite"));
  CHECK_THAT(fresh.out, !Contains("--resume"));  // there is nothing to resume

  CliResult again = run_attnlab("train" + kTiny + " --steps 2 --eval-every 2 --overwrite --run " + run);
  INFO(again.out);
  CHECK(again.code == 0);
  CHECK(checkpoint_steps(run) == std::vector<int64_t>{2});
}

TEST_CASE("a run that fails before its first step leaves nothing behind: not the run directory, not the parents it made, "
          "and a user's empty directory stays empty",
          "[cli][run-safety]") {
  TempDir dir("safety-undo");
  // A file-size limit of 200 bytes: the marker and the lock's pid fit, config.ini does not.
  Child nested("train" + kTiny + " --steps 5 --run " + (dir / "a/b/run"), dir / "nested.log", 200);
  const int code = nested.wait();
  INFO(slurp(dir / "nested.log"));
  CHECK(code == 2);
  CHECK_THAT(slurp(dir / "nested.log"), Contains("config.ini"));
  CHECK_FALSE(fs::exists(dir / "a"));

  // A limit of 1 byte: even the marker cannot be written (before: SIGXFSZ killed the process, leaving a/b/run).
  Child no_bytes("train" + kTiny + " --steps 5 --run " + (dir / "a/b/run"), dir / "no-bytes.log", 1);
  const int no_bytes_code = no_bytes.wait();
  INFO(slurp(dir / "no-bytes.log"));
  CHECK(no_bytes_code == 2);
  CHECK_FALSE(fs::exists(dir / "a"));

  fs::create_directories(dir / "empty");
  Child into_empty("train" + kTiny + " --steps 5 --run " + (dir / "empty"), dir / "empty.log", 200);
  CHECK(into_empty.wait() == 2);
  CHECK(fs::is_directory(dir / "empty"));
  CHECK(fs::is_empty(dir / "empty"));
}

TEST_CASE("scripts/tools/sweep.py: the user's --threads wins over the sweep's own, --run is refused up front, and a failing "
          "point's reason is printed",
          "[cli][run-safety][sweep]") {
  TempDir dir("safety-sweep");
  const std::string sweep = "python3 '" + std::string(ATTNLAB_TEST_DATA) + "/../../scripts/tools/sweep.py' --attnlab '" +
                            std::string(ATTNLAB_EXE) + "' --out '" + (dir / "sweep") + "' --jobs 1";
  // --lr 1e30 passes attnlab's check (the sweep's, before anything runs) and fails in training: that point
  // fails, the other trains. (--heads 4 with --d-model 30 is refused before any point runs: tests/test_sweep.py.)
  CliResult r = shell(sweep + " --grid lr=1e30,1e-3 --" + kShape + " --d-model 32 --heads 4 --threads 1 --steps 2 --eval-every 2");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(read_summary(dir / "sweep/lr1e-3")["steps"] == 2);
  CHECK_THAT(r.out, Contains("lr1e30 failed") && Contains("non-finite loss at step"));
  CHECK_THAT(r.out, !Contains("cannot be specified more than once"));

  CliResult run_given = shell(sweep + " --grid d-model=32 -- --run " + (dir / "elsewhere"));
  INFO(run_given.out);
  CHECK(run_given.code != 0);
  CHECK_THAT(run_given.out, Contains("--run cannot be given after --"));
  CHECK_FALSE(fs::exists(dir / "elsewhere"));
}

TEST_CASE("run paths: a control character is refused at creation, an empty --run is refused, a file or a symlink loop "
          "is named for what it is, and the commands attnlab suggests are shell-quoted",
          "[cli][run-safety]") {
  TempDir dir("safety-paths");
  CliResult tab = run_attnlab("train" + kTiny + " --steps 2 --run '" + (dir / "a\tb") + "'");
  INFO(tab.out);
  CHECK(tab.code == 2);
  CHECK_THAT(tab.out, Contains("\\x09b' has a control character (byte 9 at offset"));
  CHECK(fs::is_empty(dir.path));
  CliResult newline = run_attnlab("train" + kTiny + " --steps 2 --run '" + (dir / "a\nb") + "'");
  CHECK(newline.code == 2);
  CHECK_THAT(newline.out, Contains("has a control character (byte 10 at offset"));
  CHECK(fs::is_empty(dir.path));

  CliResult empty = run_attnlab("train" + kTiny + " --steps 2 --run ''");
  CHECK(empty.code == 2);
  CHECK(empty.out == "attnlab train: --run needs a path, got an empty one\n");

  std::ofstream(dir / "afile") << "mine\n";
  fs::create_symlink(dir / "loop", dir / "loop");
  for (const std::string command : {"eval --run ", "train --steps 5 --resume "}) {
    CliResult file = run_attnlab(command + (dir / "afile"));
    INFO(file.out);
    CHECK(file.code == 2);
    CHECK_THAT(file.out, Contains("'" + (dir / "afile") + "' is not a directory, so it is not a run directory"));
    CliResult loop = run_attnlab(command + (dir / "loop"));
    INFO(loop.out);
    CHECK(loop.code == 2);
    CHECK_THAT(loop.out, Contains("run directory '" + (dir / "loop") + "' cannot be opened: Too many levels of symbolic links"));
  }
  CliResult loop_new = run_attnlab("train" + kTiny + " --steps 2 --run " + (dir / "loop"));
  CHECK(loop_new.code == 2);
  CHECK_THAT(loop_new.out, Contains("cannot be opened: Too many levels of symbolic links"));
  CHECK(slurp(dir / "afile") == "mine\n");

  // A path with a space and a quote: config.ini's "repeat with" line and the resume hint work when pasted.
  const std::string spaced = dir / "my run's";
  CliResult trained = run_attnlab("train" + kTiny + " --steps 2 --eval-every 2 --run \"" + spaced + "\"");
  INFO(trained.out);
  REQUIRE(trained.code == 0);
  const std::string quoted = "'" + (dir / "my run'\\''s") + "'";
  CHECK_THAT(slurp(spaced + "/config.ini"),
             Contains("repeat with  attnlab train --config " + quoted.substr(0, quoted.size() - 1) + "/config.ini'"));
  CliResult again = run_attnlab("train" + kTiny + " --steps 2 --run \"" + spaced + "\"");
  CHECK(again.code == 2);
  CHECK_THAT(again.out, Contains("use --resume " + quoted + ", another --run"));
  CliResult resumed = run_attnlab("train --resume " + quoted + " --steps 4 --quiet");  // the hint, pasted
  INFO(resumed.out);
  CHECK(resumed.code == 0);
}

TEST_CASE("a resumed run's options are those its checkpoint was trained with: an edited task, lr or seed in config.ini "
          "is refused naming both values, an option --resume may change is not",
          "[cli][run-safety]") {
  TempDir dir("safety-edited");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kTiny + " --steps 2 --eval-every 2 --run " + run).code == 0);
  const std::string config = slurp(run + "/config.ini");
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = config;
    REQUIRE(text.find("\n" + from + "\n") != std::string::npos);
    text.replace(text.find("\n" + from + "\n") + 1, from.size(), to);
    std::ofstream(run + "/config.ini") << text;
    return run_attnlab("train --resume " + run + " --steps 4 --quiet");
  };
  const std::string lr_line = config.substr(config.find("\nlr = ") + 1, config.find('\n', config.find("\nlr = ") + 1) -
                                                                             config.find("\nlr = ") - 1);
  const std::map<std::string, std::string> edits = {
      {"task = reverse", "task = copy"}, {lr_line, "lr = 0.5"}, {"seed = 0", "seed = 7"}};
  for (const auto& [from, to] : edits) {
    CliResult r = edited(from, to);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains(run + "/config.ini gives " + to + ", but the checkpoint of step 2 was trained with " +
                               from + " (was config.ini edited?"));
    CHECK_FALSE(fs::exists(run + "/checkpoints/step-00000004.safetensors"));
  }
  // steps is one of the options a resume may change: config.ini's value is only the default.
  CliResult steps = edited("steps = 2", "steps = 3");
  INFO(steps.out);
  CHECK(steps.code == 0);
  CHECK(fs::exists(run + "/checkpoints/step-00000004.safetensors"));
}
