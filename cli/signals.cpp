#include "cli/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>

namespace attnlab::cli {

namespace {

constexpr int kWatched[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<int> g_signal{0};         // the first stop request under the guard
std::atomic<bool> g_guarded{false};   // an InterruptGuard lives
std::atomic<bool> g_checkpointed{false};  // the run has a checkpoint on disk (set_checkpoint_exists)
sigset_t g_ignored_at_start;          // dispositions the process started with: SIG_IGN
sigset_t g_taken;                     // the signals the watcher waits for
struct sigaction g_old_xfsz, g_old_xfsz_only;  // InterruptGuard's and FileSizeSignalGuard's

static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "the flags are also touched from a signal handler");

// A signal's effect; from the watcher thread, or (only in a thread created
// before start_signal_watcher) from a handler, so async-signal-safe calls only.
void on_signal(int signal) {
  if (!g_guarded.load()) {
    if (sigismember(&g_ignored_at_start, signal)) return;
    ::signal(signal, SIG_DFL);  // the default action: the process ends by this signal
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signal);
    ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(signal);
    ::_exit(128 + signal);  // not reached
  }
  int none = 0;
  if (g_signal.compare_exchange_strong(none, signal)) return;  // the first request: stop after this step
  // A closing terminal often sends SIGHUP twice (the kernel to the foreground
  // job, then the shell to each of its jobs): only a user's second SIGINT or
  // SIGTERM means "leave now".
  if (signal == SIGHUP) return;
  static const char kIntact[] = "\nattnlab: interrupted again; exiting at once (the last checkpoint is intact)\n";
  static const char kNone[] =
      "\nattnlab: interrupted again; exiting at once (no checkpoint had been written yet: start the run again, "
      "with --overwrite if its directory exists)\n";
  const bool intact = g_checkpointed.load();
  const ssize_t ignored = ::write(STDERR_FILENO, intact ? kIntact : kNone, (intact ? sizeof kIntact : sizeof kNone) - 1);
  (void)ignored;
  ::_exit(128 + signal);
}

void watch() {
  for (;;) {
    int signal = 0;
    if (::sigwait(&g_taken, &signal) == 0) on_signal(signal);
  }
}

void start_once() {
  sigemptyset(&g_ignored_at_start);
  sigemptyset(&g_taken);
  for (const int signal : kWatched) {
    struct sigaction old = {};
    ::sigaction(signal, nullptr, &old);
    if (old.sa_handler == SIG_IGN) {
      // Started under nohup: the user asked for hangups to change nothing.
      if (signal == SIGHUP) continue;
      sigaddset(&g_ignored_at_start, signal);  // still a stop request in a run, as a user's kill expects
    }
    // A handler, not SIG_IGN, so that the kernel keeps the signal pending for
    // the watcher instead of discarding it.
    struct sigaction action = {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a blocking read or write resumes instead of failing with EINTR
    ::sigaction(signal, &action, nullptr);
    sigaddset(&g_taken, signal);
  }
  ::pthread_sigmask(SIG_BLOCK, &g_taken, nullptr);  // inherited by every thread created from here on
  std::thread(watch).detach();
}

std::once_flag g_started;

}  // namespace

void start_signal_watcher() { std::call_once(g_started, start_once); }

InterruptGuard::InterruptGuard() {
  start_signal_watcher();
  g_signal = 0;
  g_checkpointed = false;
  g_guarded = true;
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGXFSZ, &ignore, &g_old_xfsz);
}

InterruptGuard::~InterruptGuard() {
  g_guarded = false;
  ::sigaction(SIGXFSZ, &g_old_xfsz, nullptr);
}

FileSizeSignalGuard::FileSizeSignalGuard() {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGXFSZ, &ignore, &g_old_xfsz_only);
}

FileSizeSignalGuard::~FileSizeSignalGuard() { ::sigaction(SIGXFSZ, &g_old_xfsz_only, nullptr); }

int interrupt_signal() { return g_signal; }

void set_checkpoint_exists() { g_checkpointed = true; }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGHUP) return "SIGHUP";
  return "signal " + std::to_string(signal);
}

int interrupt_exit_code(int signal) { return 128 + signal; }

}  // namespace attnlab::cli
