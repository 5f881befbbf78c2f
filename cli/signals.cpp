#include "cli/signals.h"

#include <unistd.h>

#include <csignal>

namespace attnlab::cli {

namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_int, g_old_term, g_old_hup, g_old_xfsz;
struct sigaction g_old_xfsz_only;  // FileSizeSignalGuard's

void on_interrupt(int signal) {
  // A closing terminal often sends SIGHUP twice (the kernel to the foreground
  // job, then the shell to each of its jobs): only a user's second SIGINT or
  // SIGTERM means "leave now".
  if (g_signal != 0 && signal == SIGHUP) return;
  if (g_signal != 0) {
    // The second request: leave now. Only async-signal-safe calls here.
    static const char kMessage[] = "\nattnlab: interrupted again; exiting at once (the last checkpoint is intact)\n";
    const ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    (void)ignored;
    ::_exit(128 + signal);
  }
  g_signal = signal;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal = 0;
  struct sigaction action = {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a blocking read or write resumes instead of failing with EINTR
  ::sigaction(SIGINT, &action, &g_old_int);
  ::sigaction(SIGTERM, &action, &g_old_term);
  ::sigaction(SIGHUP, &action, &g_old_hup);
  // Started under nohup (SIGHUP ignored): the user asked for hangups to change nothing.
  if (g_old_hup.sa_handler == SIG_IGN) ::sigaction(SIGHUP, &g_old_hup, nullptr);
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGXFSZ, &ignore, &g_old_xfsz);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGHUP, &g_old_hup, nullptr);
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

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGHUP) return "SIGHUP";
  return "signal " + std::to_string(signal);
}

int interrupt_exit_code(int signal) { return 128 + signal; }

}  // namespace attnlab::cli
