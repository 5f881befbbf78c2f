// Reliability of training runs, end to end through the attnlab executable:
// bad checkpoints are refused without touching the run, SIGINT/SIGTERM stop
// cleanly and resume bitwise, SIGKILL never leaves an unloadable checkpoint,
// NaNs stop or skip as --on-nan says, a full disk keeps the last checkpoint,
// and every bad flag or input gets one clear line and exit code 2.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "framework/io/atomic_file.h"
#include "framework/io/checkpoint.h"
#include "framework/io/safetensors.h"
#include "models/sequence_model.h"
#include "tests/child_process.h"
#include "tests/cli_harness.h"
#include "tests/fixtures.h"

namespace fs = std::filesystem;
using attnlab::testing::run_attnlab;
using attnlab::testing::run_attnlab_faults;
using attnlab::testing::slurp;
using attnlab::testing::spawn;
using attnlab::testing::wait_exit;
using attnlab::testing::wait_until;
using attnlab::testing::TempDir;
using Result = attnlab::testing::CliResult;
using namespace attnlab;
using Catch::Matchers::Contains;

namespace {

const char* kTinyTask = " --task reverse --vocab 6 --min-len 5 --max-len 5 --heads 2 --layers 1 --d-ff 64"
                        " --batch-size 32 --threads 1 --quiet";
const std::string kTiny = std::string(kTinyTask) + " --d-model 32 --heldout 200";

// Complete metric rows (header excluded) written so far.
int64_t metric_rows(const std::string& run) {
  const std::string text = slurp(run + "/metrics.csv");
  const int64_t lines = std::count(text.begin(), text.end(), '\n');
  return lines > 0 ? lines - 1 : 0;
}

std::string checkpoint(const std::string& run, int64_t step, const char* suffix = ".safetensors") {
  char name[64];
  std::snprintf(name, sizeof name, "/checkpoints/step-%08lld%s", static_cast<long long>(step), suffix);
  return run + name;
}

// Every file under `dir`, path -> content: "the run directory is unchanged".
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) out[entry.path().string()] = slurp(entry.path().string());
  return out;
}

bool same_tensors(const std::string& a_path, const std::string& b_path) {
  SafetensorsData a = load_safetensors(a_path), b = load_safetensors(b_path);
  if (a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor &x = a.tensors[i].second, &y = b.tensors[i].second;
    if (a.tensors[i].first != b.tensors[i].first || x.shape() != y.shape() ||
        (x.numel() > 0 && std::memcmp(x.data(), y.data(), sizeof(Real) * static_cast<size_t>(x.numel())) != 0))
      return false;
  }
  return true;
}

bool all_finite(const std::string& path) {
  for (const auto& [name, t] : load_safetensors(path).tensors)
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t[i])) return false;
  return true;
}

int64_t step_after(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  REQUIRE(at != std::string::npos);
  return std::stoll(text.substr(at + marker.size()));
}

int64_t lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

bool has_temporaries(const std::string& dir) {
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("eval and train --resume refuse a truncated, corrupt, wrong-version or wrong-model checkpoint, "
          "say which and why, and leave the run unchanged", "[cli][reliability]") {
  TempDir dir("rel-refuse");
  const std::string run = dir / "run", other = dir / "other";
  REQUIRE(run_attnlab("train" + kTiny + " --steps 20 --eval-every 10 --run " + run).code == 0);
  REQUIRE(run_attnlab("train" + std::string(kTinyTask) + " --d-model 16 --heldout 200 --steps 10 --eval-every 10 --run " + other).code == 0);
  const std::string model = checkpoint(run, 20), optim = checkpoint(run, 20, ".optim.safetensors");
  const std::string good = slurp(model), good_optim = slurp(optim);

  SafetensorsData decoded = load_safetensors(model);
  TensorRefs refs;
  for (const auto& [name, t] : decoded.tensors) refs.emplace_back(name, &t);
  Metadata v3 = decoded.metadata;
  v3["format_version"] = "3";
  Metadata unsummed = decoded.metadata;  // as version 1 wrote them, apart from the version
  unsummed.erase("metadata_checksum");
  std::string corrupt_data = good;
  corrupt_data[corrupt_data.size() - 3] ^= 0x40;  // a bit of the last tensor's last value
  std::string corrupt_meta = good;
  const size_t step_at = corrupt_meta.find("\"step\":\"20\"");
  REQUIRE(step_at != std::string::npos);
  corrupt_meta[step_at + 9] = '1';  // "step":"10": a valid number, just not the one written

  struct Case {
    const char* what;
    std::string file, bytes, reason;
    bool eval_refuses;
  };
  const std::vector<Case> cases = {
      {"truncated to half", model, good.substr(0, good.size() / 2), "the file is truncated or corrupt", true},
      {"truncated to 5 bytes", model, good.substr(0, 5), "shorter than the 8-byte header length", true},
      {"a flipped bit in the data", model, corrupt_data, "checksum mismatch: the tensor data is corrupt", true},
      {"a changed metadata value", model, corrupt_meta, "metadata checksum mismatch", true},
      {"format version 3", model, encode_safetensors(refs, v3), "checkpoint format version 3, this attnlab reads version 2", true},
      {"no metadata checksum", model, encode_safetensors(refs, unsummed), "no 'metadata_checksum' in its metadata", true},
      {"another model's weights", model, slurp(checkpoint(other, 10)), "the checkpoint is of a different model", true},
      {"a plain safetensors file", model, encode_safetensors(refs), "not an attnlab checkpoint", true},
      {"the optimizer file for the model file", model, good_optim, "holds an optimizer checkpoint, expected a model checkpoint", true},
      {"a truncated optimizer file", optim, good_optim.substr(0, good_optim.size() - 100), "truncated or corrupt", false},
  };
  for (const Case& c : cases) {
    INFO("case: " << c.what);
    write_file_atomic(c.file, c.bytes);
    const auto before = snapshot(run);
    Result e = run_attnlab("eval --run " + run);
    INFO("eval: " << e.out);
    if (c.eval_refuses) {
      CHECK(e.code == 2);
      CHECK_THAT(e.out, Contains(c.file) && Contains(c.reason));
      CHECK(lines(e.out) == 1);
    } else {
      CHECK(e.code == 0);  // eval needs only the weights
    }
    Result r = run_attnlab("train --resume " + run + " --steps 30 --quiet");
    INFO("resume: " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains(c.file) && Contains(c.reason));
    CHECK(lines(r.out) == 1);
    CHECK(snapshot(run) == before);
    write_file_atomic(c.file, c.file == model ? good : good_optim);
  }
  // Restored, the run continues: the refusals did no harm.
  Result r = run_attnlab("train --resume " + run + " --steps 30 --quiet");
  INFO(r.out);
  CHECK(r.code == 0);
}

TEST_CASE("load_checkpoint refuses bad files with IoError naming the file and the problem, model and optimizer untouched",
          "[io][reliability]") {
  TempDir dir("rel-api");
  const TransformerConfig c = testing::model_config("decoder", 8, 16, 8, 2, 1, 16);
  auto saved = make_model(c, 1);
  auto saved_opt = make_optimizer(OptimizerConfig{}, saved->named_parameters());
  const std::string stem = dir / "ck";
  save_checkpoint(stem, *saved, saved_opt.get(), {{"step", "3"}});
  const std::string good = slurp(model_path(stem)), good_optim = slurp(optimizer_path(stem));
  TransformerConfig wider = c;
  wider.d_model = 16;
  auto other = make_model(wider, 1);
  save_checkpoint(dir / "other", *other, nullptr, {});

  auto model = make_model(c, 2);
  auto optimizer = make_optimizer(OptimizerConfig{}, model->named_parameters());
  const Tensor first_before = model->named_parameters().front().second.value();
  auto refused = [&](const std::string& file, const std::string& bytes, const std::string& reason) {
    INFO("expecting: " << reason);
    write_file_atomic(file, bytes);
    REQUIRE_THROWS_AS(load_checkpoint(stem, *model, optimizer.get()), IoError);
    REQUIRE_THROWS_WITH(load_checkpoint(stem, *model, optimizer.get()), Contains(file) && Contains(reason));
    const Tensor& now = model->named_parameters().front().second.value();
    REQUIRE(std::memcmp(now.data(), first_before.data(), sizeof(Real) * static_cast<size_t>(now.numel())) == 0);
    write_file_atomic(model_path(stem), good);
    write_file_atomic(optimizer_path(stem), good_optim);
  };
  std::string flipped = good;
  flipped[flipped.size() - 1] ^= 0x01;
  refused(model_path(stem), good.substr(0, good.size() - 1), "truncated or corrupt");
  refused(model_path(stem), flipped, "checksum mismatch");
  refused(model_path(stem), slurp(model_path(dir / "other")), "different model");
  refused(model_path(stem), good_optim, "expected a model checkpoint");
  refused(optimizer_path(stem), good_optim.substr(0, 40), "truncated or corrupt");
  refused(optimizer_path(stem), good, "expected an optimizer checkpoint");
  fs::remove(optimizer_path(stem));
  REQUIRE_THROWS_WITH(load_checkpoint(stem, *model, optimizer.get()), Contains(optimizer_path(stem)));
  write_file_atomic(optimizer_path(stem), good_optim);
  // And the intact checkpoint loads.
  REQUIRE(load_checkpoint(stem, *model, optimizer.get()).at("step") == "3");
}

TEST_CASE("SIGINT finishes the step, checkpoints, says how to resume and exits 130, the resumed run is bitwise "
          "the uninterrupted one", "[cli][reliability][signals]") {
  TempDir dir("rel-sigint");
  const std::string flags = kTiny + " --target 0 --dropout 0.1 --eval-every 25 --log-every 1";
  const std::string a = dir / "a", b = dir / "b";
  const pid_t pid = spawn("train" + flags + " --steps 100000 --run " + a, dir / "a.log");
  wait_until(pid, [&] { return metric_rows(a) >= 30; });
  REQUIRE(::kill(pid, SIGINT) == 0);
  REQUIRE(wait_exit(pid) == 130);
  const std::string log = slurp(dir / "a.log");
  INFO(log);
  const int64_t k = step_after(log, "interrupted by SIGINT after step ");
  CHECK_THAT(log, Contains("Resume with: attnlab train --resume " + a + " --steps 100000"));
  REQUIRE(fs::exists(checkpoint(a, k)));
  REQUIRE(run_attnlab("eval --run " + a).code == 0);

  const int64_t n = k + 30;
  Result resumed = run_attnlab("train --resume " + a + " --steps " + std::to_string(n) + " --quiet");
  INFO(resumed.out);
  REQUIRE(resumed.code == 0);
  Result whole = run_attnlab("train" + flags + " --steps " + std::to_string(n) + " --run " + b);
  INFO(whole.out);
  REQUIRE(whole.code == 0);
  CHECK(same_tensors(checkpoint(a, n), checkpoint(b, n)));
  CHECK(same_tensors(checkpoint(a, n, ".optim.safetensors"), checkpoint(b, n, ".optim.safetensors")));
}

TEST_CASE("SIGTERM checkpoints and exits 143", "[cli][reliability][signals]") {
  TempDir dir("rel-sigterm");
  const std::string run = dir / "run";
  const pid_t pid = spawn("train" + kTiny + " --target 0 --eval-every 1000 --log-every 1 --steps 100000 --run " + run,
                          dir / "log");
  wait_until(pid, [&] { return metric_rows(run) >= 5; });
  REQUIRE(::kill(pid, SIGTERM) == 0);
  REQUIRE(wait_exit(pid) == 143);
  const std::string log = slurp(dir / "log");
  INFO(log);
  const int64_t k = step_after(log, "interrupted by SIGTERM after step ");
  CHECK(fs::exists(checkpoint(run, k)));
  Result e = run_attnlab("eval --run " + run);
  INFO(e.out);
  CHECK(e.code == 0);
  CHECK_THAT(e.out, Contains("(step " + std::to_string(k) + ")"));
}

// Steps long enough (a tenth of a second or more), most of it inside matrix
// products, that signals sent a few milliseconds apart land inside one step.
const std::string kHeavy = " --task reverse --vocab 16 --min-len 32 --max-len 32 --d-model 128 --heads 4 --layers 2"
                           " --d-ff 512 --batch-size 128 --heldout 20 --threads 1 --quiet --target 0 --log-every 1";

TEST_CASE("a second SIGINT exits at once with 130 and every checkpoint still loads", "[cli][reliability][signals]") {
  TempDir dir("rel-double");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kHeavy + " --steps 1 --run " + run).code == 0);
  const auto checkpoints_before = run_attnlab("eval --run " + run);
  REQUIRE(checkpoints_before.code == 0);
  // A first SIGINT that lands in the last moments of a step lets the run stop
  // normally before the second arrives; a few tries make that race irrelevant.
  bool exited_at_once = false;
  for (int attempt = 0; attempt < 3 && !exited_at_once; ++attempt) {
    const int64_t rows = metric_rows(run);
    const pid_t pid = spawn("train --resume " + run + " --steps 100000 --eval-every 100000 --quiet", dir / "log");
    wait_until(pid, [&] { return metric_rows(run) > rows; });  // a step ended (its row is written last)
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // well inside the next one
    REQUIRE(::kill(pid, SIGINT) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGINT);
    REQUIRE(wait_exit(pid) == 130);
    const std::string log = slurp(dir / "log");
    INFO(log);
    exited_at_once = log.find("interrupted again; exiting at once") != std::string::npos;
    // Either way every checkpoint on disk loads.
    Result e = run_attnlab("eval --run " + run);
    INFO(e.out);
    REQUIRE(e.code == 0);
  }
  CHECK(exited_at_once);
}

// A signal handler that runs on a thread inside one of oneDNN 2.6's JIT
// matrix products overwrites the heap (those kernels move the stack pointer
// into a heap buffer): the process later aborted in free() in about half of
// the single-SIGINT runs, and in every run under this burst. Only the watcher
// thread may take the signals (cli/signals.h). SIGHUP after the first is
// ignored by design, so hundreds of them change nothing but the first request.
TEST_CASE("a burst of SIGHUPs in the middle of matrix products stops the run once and cleanly: exit 129, the checkpoint loads",
          "[cli][reliability][signals]") {
  TempDir dir("rel-burst");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kHeavy + " --steps 1 --run " + run).code == 0);
  const int64_t rows = metric_rows(run);
  const pid_t pid = spawn("train --resume " + run + " --steps 100000 --eval-every 100000 --quiet", dir / "log");
  wait_until(pid, [&] { return metric_rows(run) > rows; });  // a step ended (its row is written last)
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < 300; ++i) {  // about 0.3 s of signals: the rest of a step and the checkpoint
    if (::kill(pid, SIGHUP) != 0) break;  // it has exited
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int code = wait_exit(pid);
  const std::string log = slurp(dir / "log");
  INFO(log);
  REQUIRE(code == 129);
  const int64_t k = step_after(log, "interrupted by SIGHUP after step ");
  CHECK(fs::exists(checkpoint(run, k)));
  Result e = run_attnlab("eval --run " + run);
  INFO(e.out);
  CHECK(e.code == 0);
  CHECK_THAT(e.out, Contains("(step " + std::to_string(k) + ")"));
}

// What the parent ignored stays ignored where it should: nohup's SIGHUP
// everywhere, a script's background job's SIGINT outside a run. Inside a run a
// SIGINT is still the stop request a user's kill -INT means.
TEST_CASE("started with SIGHUP and SIGINT ignored: a hangup changes nothing, SIGINT still stops a run with 130, and "
          "outside a run SIGINT stays ignored", "[cli][reliability][signals]") {
  TempDir dir("rel-ignored");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kHeavy + " --steps 1 --run " + run).code == 0);
  auto ignoring = [](const std::string& args) {  // as nohup and a non-interactive shell's `&` start it
    std::vector<std::string> argv = attnlab::testing::words(args);
    argv.insert(argv.begin(), {std::string("/usr/bin/env"), "--ignore-signal=HUP,INT", ATTNLAB_EXE});
    return argv;
  };
  const int64_t rows = metric_rows(run);
  const pid_t pid =
      attnlab::testing::spawn_program(ignoring("train --resume " + run + " --steps 100000 --eval-every 100000 --quiet"),
                                      dir / "log");
  wait_until(pid, [&] { return metric_rows(run) > rows; });
  REQUIRE(::kill(pid, SIGHUP) == 0);
  const int64_t after_hangup = metric_rows(run);
  wait_until(pid, [&] { return metric_rows(run) >= after_hangup + 3; });  // still training (fails if it exited)
  REQUIRE(::kill(pid, SIGINT) == 0);
  const int code = wait_exit(pid, 120);
  const std::string log = slurp(dir / "log");
  INFO(log);
  CHECK(code == 130);
  CHECK(log.find("interrupted by SIGINT after step ") != std::string::npos);
  // eval is no interruptible run: the ignored SIGINT lets it finish (it takes a second or
  // more; minutes under the sanitizers).
  const pid_t eval = attnlab::testing::spawn_program(ignoring("eval --run " + run + " --heldout 4000"), dir / "eval.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(eval, SIGINT);
  CHECK(wait_exit(eval, 900) == 0);
  CHECK_THAT(slurp(dir / "eval.log"), Contains("exact match"));
}

TEST_CASE("SIGKILL at random moments never leaves the latest checkpoint unloadable", "[cli][reliability][signals]") {
  TempDir dir("rel-sigkill");
  const std::string run = dir / "run";
  // A checkpoint every other step, so that many kills land inside a write.
  const std::string flags = std::string(kTinyTask) + " --d-model 32 --heldout 20 --target 0 --eval-every 2 --log-every 1 --keep 2";
  std::mt19937_64 rng(77);  // the moments are random but repeatable
  constexpr int kKills = 10;
  int loadable = 0;
  for (int i = 0; i < kKills; ++i) {
    const pid_t pid = spawn(i == 0 ? "train" + flags + " --steps 1000000 --run " + run
                                   : "train --resume " + run + " --steps 1000000 --quiet",
                            dir / "log");
    if (i == 0) wait_until(pid, [&] { return fs::exists(checkpoint(run, 2)); });
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400000));
    ::kill(pid, SIGKILL);
    const int code = wait_exit(pid);
    INFO("kill " << i << ": exit " << code << "\n" << slurp(dir / "log"));
    REQUIRE(code == 128 + SIGKILL);
    Result e = run_attnlab("eval --run " + run);
    INFO(e.out);
    CHECK(e.code == 0);
    loadable += e.code == 0;
  }
  CHECK(loadable == kKills);
  // A last resume runs to its end and clears what the kills left half-written.
  Result latest = run_attnlab("eval --run " + run);
  const int64_t step = step_after(latest.out, "(step ");
  Result r = run_attnlab("train --resume " + run + " --steps " + std::to_string(step + 4) + " --quiet");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_FALSE(has_temporaries(run));
}

TEST_CASE("train --on-nan stop names the step and the first parameter affected and keeps the last good checkpoint, "
          "skip continues", "[cli][reliability][nan]") {
  TempDir dir("rel-nan");
  const std::string flags = kTiny + " --target 0 --eval-every 10";
  // A parameter from the middle of the model, so that "the first affected" is not just the first one.
  REQUIRE(run_attnlab("train" + flags + " --steps 10 --run " + (dir / "names")).code == 0);
  const auto names = load_safetensors(checkpoint(dir / "names", 10)).tensors;
  const std::string param = names[names.size() / 2].first;
  const std::string inject = "ATTNLAB_DEBUG_NAN_AT_STEP=15 ATTNLAB_DEBUG_NAN_PARAM=" + param;

  SECTION("stop on a NaN gradient") {
    const std::string run = dir / "stop";
    Result r = run_attnlab_faults("train" + flags + " --steps 30 --run " + run, inject);
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Contains("non-finite gradient at step 15") && Contains("first parameter affected: " + param + ")") &&
                          Contains("The last checkpoint (step 10) is kept"));
    CHECK(lines(r.out) == 1);
    CHECK_FALSE(fs::exists(checkpoint(run, 20)));
    CHECK(all_finite(checkpoint(run, 10)));
    Result e = run_attnlab("eval --run " + run);
    CHECK(e.code == 0);
    CHECK_THAT(e.out, Contains("(step 10)"));
  }
  SECTION("stop on a NaN loss") {
    Result r = run_attnlab_faults("train" + flags + " --steps 30 --run " + (dir / "loss"),
                           "ATTNLAB_DEBUG_NAN_AT_STEP=15 ATTNLAB_DEBUG_NAN_PARAM=loss");
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Contains("non-finite loss at step 15") && Contains("(none: the loss itself)"));
  }
  SECTION("without the injection the same run ends normally") {
    Result r = run_attnlab("train" + flags + " --steps 30 --run " + (dir / "clean"));
    CHECK(r.code == 0);
    CHECK(r.out.empty());
  }
  SECTION("skip, also on the last step, which still gets its checkpoint") {
    const std::string run = dir / "skip";
    Result r = run_attnlab_faults("train" + flags + " --steps 30 --on-nan skip --run " + run,
                           "ATTNLAB_DEBUG_NAN_AT_STEP=30 ATTNLAB_DEBUG_NAN_PARAM=" + param);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("non-finite gradient at step 30") && Contains(param) && Contains("step skipped"));
    REQUIRE(fs::exists(checkpoint(run, 30)));
    CHECK(all_finite(checkpoint(run, 30)));
    // The skipped step changed nothing: its weights and optimizer state are those after step 29.
    REQUIRE(run_attnlab("train" + flags + " --steps 29 --run " + (dir / "29")).code == 0);
    CHECK(same_tensors(checkpoint(run, 30), checkpoint(dir / "29", 29)));
    CHECK(same_tensors(checkpoint(run, 30, ".optim.safetensors"), checkpoint(dir / "29", 29, ".optim.safetensors")));
    Result mid = run_attnlab_faults("train" + flags + " --steps 30 --on-nan skip --run " + (dir / "skip-mid"),
                             "ATTNLAB_DEBUG_NAN_AT_STEP=15 ATTNLAB_DEBUG_NAN_PARAM=" + param);
    CHECK(mid.code == 0);
    CHECK(all_finite(checkpoint(dir / "skip-mid", 30)));
  }
}

TEST_CASE("a full disk while checkpointing gives a clear error and keeps the previous checkpoint", "[cli][reliability]") {
  TempDir dir("rel-disk");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kTiny + " --target 0 --steps 10 --eval-every 10 --run " + run).code == 0);
  const auto before = slurp(checkpoint(run, 10));
  REQUIRE(before.size() > 16384);
  // Files may grow to 16 KiB: metrics.csv fits, a checkpoint does not. SIGXFSZ is not ignored
  // here: attnlab must ignore it itself, or it would die of it instead of reporting EFBIG.
  const pid_t pid = spawn("train --resume " + run + " --steps 20", dir / "log", 16384);
  const int code = wait_exit(pid);
  const std::string log = slurp(dir / "log");
  INFO(log);
  CHECK(code == 1);  // a failure during the run, not bad input (2)
  CHECK_THAT(log, Contains(std::strerror(EFBIG)) && Contains("the checkpoint of step 20 was not written") &&
                      Contains("the checkpoint of step 10 is intact"));
  CHECK(slurp(checkpoint(run, 10)) == before);
  CHECK_FALSE(fs::exists(checkpoint(run, 20)));
  CHECK_FALSE(fs::exists(checkpoint(run, 20, ".optim.safetensors")));
  CHECK_FALSE(has_temporaries(run));
  CHECK(run_attnlab("eval --run " + run).code == 0);
  // With room again, the run continues.
  Result r = run_attnlab("train --resume " + run + " --steps 20 --quiet");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(fs::exists(checkpoint(run, 20)));
}

TEST_CASE("a full disk while writing the event file or metrics.csv is a failure of the run, not bad input: exit 1, "
          "the intact checkpoint and the resume command named, the run kept, before or after its first checkpoint",
          "[cli][reliability]") {
  TempDir dir("rel-events");
  // A row a step: the event file outgrows 48 KiB after about 150 steps; each file of a checkpoint fits.
  const std::string flags = std::string(kTinyTask) + " --d-model 8 --heldout 200 --target 0 --steps 100000 --log-every 1 --tensorboard";
  const std::string run = dir / "run";
  const int code = wait_exit(spawn("train" + flags + " --eval-every 20 --run " + run, dir / "log", 49152));
  std::string log = slurp(dir / "log");
  INFO(log);
  CHECK(code == 1);
  CHECK_THAT(log, Contains(std::strerror(EFBIG)) && Contains("is intact (continue with: attnlab train --resume " +
                                                                 run + " --steps 100000)"));
  CHECK(fs::exists(run + "/metrics.csv"));
  CHECK(fs::exists(run + "/config.ini"));
  Result eval = run_attnlab("eval --run " + run);
  INFO(eval.out);
  CHECK(eval.code == 0);

  // No checkpoint yet: the run that trained is kept all the same (its metrics.csv is the record).
  const std::string early = dir / "early";
  const int early_code = wait_exit(spawn("train" + flags + " --eval-every 50000 --run " + early, dir / "early.log", 49152));
  log = slurp(dir / "early.log");
  INFO(log);
  CHECK(early_code == 1);
  CHECK_THAT(log, Contains("no checkpoint had been written yet; the run directory is kept"));
  CHECK(fs::exists(early + "/metrics.csv"));
  CHECK(fs::exists(early + "/config.ini"));
}

TEST_CASE("output that cannot be written to stdout is a failure: exit 1 and one line, for predict, tasks and --help",
          "[cli][reliability]") {
  if (!fs::exists("/dev/full")) return;  // Linux's always-full device
  TempDir dir("rel-stdout");
  const std::string run = dir / "run";
  REQUIRE(run_attnlab("train" + kTiny + " --target 0 --steps 2 --eval-every 2 --run " + run).code == 0);
  for (const std::string& command : {"predict --run " + run + " \"1 2 3 4 5\"", std::string("tasks"),
                                     "predict --run " + run + " --json \"1 2 3 4 5\"", std::string("train --help")}) {
    // stdout to the full device, stderr to the test (the harness adds 2>&1 after the group).
    Result r = attnlab::testing::run_executable("{ " + std::string(ATTNLAB_EXE), command + " >/dev/full; }", "");
    INFO(command << ": " << r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Contains("could not write the output to standard output"));
  }
}

TEST_CASE("an unwritable run directory gives a clear error", "[cli][reliability]") {
  TempDir dir("rel-unwritable");
  write_file_atomic(dir / "file", "not a directory\n");
  Result under = run_attnlab("train" + kTiny + " --steps 1 --run " + (dir / "file/run"));
  INFO(under.out);
  CHECK(under.code == 2);
  CHECK_THAT(under.out, Contains("cannot create run directory '" + (dir / "file/run") + "'"));
  Result onto = run_attnlab("train" + kTiny + " --steps 1 --overwrite --run " + (dir / "file"));
  INFO(onto.out);
  CHECK(onto.code == 2);
  CHECK_THAT(onto.out, Contains("a file of that name exists"));
  CHECK(slurp(dir / "file") == "not a directory\n");  // --overwrite did not delete the user's file
}

TEST_CASE("every bad flag, config key and predict input gets one line naming it, exit code 2 and no run directory",
          "[cli][reliability][errors]") {
  TempDir dir("rel-errors");
  const std::string run = dir / "run", never = dir / "never";
  REQUIRE(run_attnlab("train" + kTiny + " --steps 10 --eval-every 10 --run " + run).code == 0);
  auto ini = [&](const std::string& name, const std::string& text) {
    write_file_atomic(dir / name, text);
    return dir / name;
  };
  std::string seventy;
  for (int i = 0; i < 70; ++i) seventy += "1 ";
  // docs/errors.md lists these with their full messages.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --heads 3 --d-model 64", "--heads 3 does not divide --d-model 64"},
      {"train --d-model 0", "--d-model must be >= 1, got 0"},
      {"train --vocab 1", "--vocab must be >= 2, got 1"},
      {"train --min-len 9 --max-len 3", "--min-len 9 is greater than --max-len 3"},
      {"train --dropout nan", "--dropout must be in [0, 1), got nan"},
      {"train --lr 0", "--lr must be > 0, got 0"},
      {"train --optimizer rmsprop", "--optimizer must be one of adam, adamw, sgd, got 'rmsprop'"},
      {"train --optimizer adam --momentum 0.9", "--momentum and --nesterov apply to --optimizer sgd, not adam"},
      {"train --optimizer sgd --beta1 0.5", "--beta1, --beta2 and --eps apply to --optimizer adam and adamw, not sgd"},
      {"train --optimizer sgd --nesterov", "--nesterov needs --momentum > 0"},
      {"train --schedule linear --warmup 500 --steps 100", "--warmup 500 must be below --steps 100"},
      {"train --schedule constant --min-lr 1e-5", "--min-lr applies to --schedule linear and cosine, not constant"},
      {"train --positional rope --d-model 30 --heads 2", "--positional rope rotates pairs of channels"},
      {"train --attn-scale banana", "--attn-scale must be sqrt, none, linear or a positive number, got 'banana'"},
      {"train --d-k 8 --parameter-free-attention", "--d-k and --d-v do not apply to --parameter-free-attention"},
      {"train --weight-decay 0 --decay-all", "--decay-all has no effect with --weight-decay 0"},
      {"train --on-nan ignore", "--on-nan must be one of skip, stop, got 'ignore'"},
      {"train --vocab 2 --min-len 2 --max-len 2 --heldout 4", "--heldout 4 leaves nothing to train on"},
      {"train --batch-size 100000000 --d-model 512", "GiB of memory, this machine has"},
      {"train --steps 1.5", "the argument ('1.5') for option '--steps' is invalid"},
      {"train --config " + ini("unknown.ini", "colour = red\n"), "unknown.ini: unrecognised option 'colour'"},
      {"train --config " + ini("type.ini", "d-model = big\n"), "type.ini: the argument ('big') for option 'd-model' is invalid"},
      {"train --config " + ini("range.ini", "d-model = -4\n"), "--d-model must be >= 1, got -4 (with --config"},
      {"train --config " + ini("syntax.ini", "d-model\n"), "syntax.ini: the options configuration file contains an invalid line"},
      {"train --config " + ini("twice.ini", "steps = 5\nsteps = 6\n"), "option 'steps' cannot be specified more than once"},
      {"train --config " + ini("contra.ini", "optimizer = sgd\nbeta1 = 0.5\n"), "apply to --optimizer adam and adamw, not sgd"},
      {"train --config " + (dir / "missing.ini"), "cannot read config file"},
      {"train --resume " + run + " --steps 5", "is already at step 10; pass --steps N with N > 10"},
      {"train --resume " + run + " --steps 20 --d-model 64", "--d-model cannot change when resuming"},
      {"eval --run " + run + " --len 500", "--len 500 needs sequences of 500 positions; this model's positional table has 64"},
      {"eval --run " + run + " --step 7", "has no checkpoint of step 7"},
      {"eval --run " + run + " --step -1", "--step must be >= 1, got -1"},
      {"predict --run " + run + " \"1 2 x\"", "unknown symbol 'x' (known: 0..5"},
      {"predict --run " + run + " \"1 2 7\"", "unknown symbol '7'"},
      {"predict --run " + run + " \"<bos> 1 2\"", "the input holds the special token <bos>"},
      {"predict --run " + run + " \"\"", "the input sequence is empty"},
      {"predict --run " + run + " \"" + seventy + "\"", "the input has 70 tokens; this model takes sequences of at most 64 positions"},
      {"bench --config XL", "--config must be S, M, L or graph, got 'XL'"},
  };
  for (const auto& [args, expected] : cases) {
    const bool trains = args.rfind("train ", 0) == 0 && args.find("--resume") == std::string::npos;
    Result r = run_attnlab(args + (trains ? " --run " + never : std::string()));
    INFO(args << " -> " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains(expected));
    CHECK(lines(r.out) == 1);
    CHECK_FALSE(fs::exists(never));
  }
}
