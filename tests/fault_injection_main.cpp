// attnlab_faults: the attnlab command line with faults injected, for the
// tests of what a run does when something goes wrong (tests/cli_harness.h,
// run_attnlab_faults). The faults come from environment variables that only
// this test binary reads, through the seams of cli/test_seams.h:
//   ATTNLAB_DEBUG_NAN_AT_STEP=N   train: step N's gradient of parameter
//       ATTNLAB_DEBUG_NAN_PARAM (default: the last one) gets a NaN, or its
//       loss when that is "loss"; with ATTNLAB_DEBUG_NAN_WEIGHT non-empty the
//       gradient stays finite and the parameter's value becomes +Inf after
//       step N's update instead, as an overflowing update would.
//   ATTNLAB_DEBUG_THROW_AT_STEP=N  train: after step N's update, the process
//       of rank ATTNLAB_DEBUG_THROW_RANK (default 0) alone throws (an error
//       the other processes cannot learn of).
//   ATTNLAB_GRADCHECK_BREAK=NAME  gradcheck: that parameter's analytic
//       gradient is scaled by 1.1 (a wrong backward).
//   ATTNLAB_DEBUG_SIGNAL_AT=K[,K2]  the K-th test point (framework/io/test_point.h:
//       the run directory made or locked, a file about to be renamed into
//       place, a step or a held-out batch done) sends this process a SIGINT
//       and waits until the signal watcher took it, so that it lands at that
//       instant; the K2-th (K2 >= K) sends a second one, which ends the
//       process at once. ATTNLAB_DEBUG_COUNT_POINTS non-empty: the process
//       prints "test points: N" on stderr when it returns.
//   ATTNLAB_DEBUG_REMOVE_CHOSEN_CHECKPOINTS=N  eval, predict, attention,
//       report: the first N checkpoints they choose are removed (both files)
//       between choosing and opening, as a run training there with --keep
//       removes its older ones.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/signals.h"
#include "cli/test_seams.h"
#include "framework/io/test_point.h"

namespace {

using namespace attnlab;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The element in the middle of `t`, where the fault goes.
Real& middle(Tensor& t) { return t[t.numel() / 2]; }

StepHooks throw_hooks() {
  StepHooks hooks;
  const std::string at = env("ATTNLAB_DEBUG_THROW_AT_STEP");
  if (at.empty()) return hooks;
  const int64_t step = std::stoll(at);
  const int rank = env("ATTNLAB_DEBUG_THROW_RANK").empty() ? 0 : std::stoi(env("ATTNLAB_DEBUG_THROW_RANK"));
  hooks.after_update = [=](TrainState& state) {
    if (state.step == step && state.communicator().rank() == rank)
      throw std::runtime_error("injected fault after step " + std::to_string(step) + " on rank " + std::to_string(rank));
  };
  return hooks;
}

StepHooks nan_hooks() {
  StepHooks hooks;
  const std::string at = env("ATTNLAB_DEBUG_NAN_AT_STEP");
  if (at.empty()) return throw_hooks();
  const int64_t step = std::stoll(at);
  const std::string param = env("ATTNLAB_DEBUG_NAN_PARAM");
  const auto target = [param](const TrainState& state) {
    return param.empty() ? state.model().named_parameters().back().second : state.model().parameter(param);
  };
  if (!env("ATTNLAB_DEBUG_NAN_WEIGHT").empty()) {
    hooks.after_update = [=](TrainState& state) {
      if (state.step == step) middle(target(state).value()) = std::numeric_limits<Real>::infinity();
    };
    return hooks;
  }
  hooks.after_backward = [=](TrainState& state, double& loss) {
    if (state.step != step) return;
    if (param == "loss") {
      loss = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    Var v = target(state);
    if (v.has_grad() && v.grad().numel() > 0) middle(v.grad()) = std::numeric_limits<Real>::quiet_NaN();
  };
  return hooks;
}

std::atomic<long long> g_points{0};

// Waits (at most ~5 s) until the watcher thread has taken the signal sent.
void wait_for_watcher() {
  for (int i = 0; i < 5000 && attnlab::cli::interrupt_signal() == 0; ++i) ::usleep(1000);
}

void install_signal_point() {
  const std::string at = env("ATTNLAB_DEBUG_SIGNAL_AT");
  if (at.empty() && env("ATTNLAB_DEBUG_COUNT_POINTS").empty()) return;
  std::vector<long long> points;  // ascending
  for (size_t begin = 0; begin < at.size();) {
    const size_t comma = std::min(at.find(',', begin), at.size());
    points.push_back(std::stoll(at.substr(begin, comma - begin)));
    begin = comma + 1;
  }
  test_point_hook() = [points] {
    const long long now = ++g_points;
    for (size_t i = 0; i < points.size(); ++i) {
      if (points[i] != now) continue;
      ::kill(::getpid(), SIGINT);  // to the process: the watcher thread takes it (cli/signals.h)
      if (i == 0) wait_for_watcher();
      else ::sleep(5);  // a second one ends the process from the watcher thread
    }
  };
}

void remove_chosen_checkpoints() {
  const std::string count = env("ATTNLAB_DEBUG_REMOVE_CHOSEN_CHECKPOINTS");
  if (count.empty()) return;
  attnlab::cli::set_checkpoint_chosen_hook_for_tests([left = std::stoi(count)](const std::string& stem) mutable {
    if (left-- <= 0) return;
    std::filesystem::remove(stem + ".safetensors");
    std::filesystem::remove(stem + ".optim.safetensors");
  });
}

}  // namespace

int main(int argc, char** argv) {
  attnlab::cli::set_step_hooks_for_tests(nan_hooks());
  attnlab::cli::set_gradcheck_break_for_tests(env("ATTNLAB_GRADCHECK_BREAK"));
  install_signal_point();
  remove_chosen_checkpoints();
  const int code = attnlab::cli::run_command_line(argc, argv);
  if (!env("ATTNLAB_DEBUG_COUNT_POINTS").empty()) std::fprintf(stderr, "test points: %lld\n", g_points.load());
  return code;
}
