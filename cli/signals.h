#pragma once
// Interrupting a training run cleanly. While an InterruptGuard lives, the
// first SIGINT, SIGTERM or SIGHUP only raises a flag, which the training loop
// reads between steps and between the batches of a held-out evaluation (which
// it then abandons): it finishes the step, writes a checkpoint and exits
// 128 + signal (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP: a closed
// terminal must not lose the run, so it stops as SIGTERM does, with the exit
// status shells report for a process that SIGHUP ends). A second one exits at once
// with that code; the checkpoint files are written atomically, so whatever is
// on disk stays loadable. `train` holds its guard from its first instant, so
// a signal while it claims the run directory is a stop request too. SIGXFSZ is ignored, so a file-size limit makes the
// write fail with EFBIG (a clear error) instead of killing the process.
//
// No compute thread ever runs a signal handler. start_signal_watcher(), called
// before the process starts any thread, blocks SIGINT, SIGTERM and SIGHUP in
// the main thread, so in every thread created after it (OpenMP's, MPI's), and
// one watcher thread takes them with sigwait. Why: the JIT matrix-product
// kernels of oneDNN 2.6 (Debian 12's libdnnl) point the stack pointer into a
// heap buffer while they run, so a handler's frame pushed on top of them
// overwrites the heap (oneDNN issue 4845, fixed upstream after 3.11). Outside an
// InterruptGuard the watcher gives each signal the effect it had when the
// process started: the default action (the process ends by that signal), or
// nothing for one the parent had ignored.
#include <string>

namespace attnlab::cli {

// Once per process, first thing in main (later calls do nothing). A thread
// that already exists keeps the signals unblocked: it would run the same
// logic as the watcher, from a handler, so correctness does not depend on
// the order, only the oneDNN hazard does.
void start_signal_watcher();

class InterruptGuard {
 public:
  InterruptGuard();   // signals become stop requests (and starts the watcher if main did not)
  ~InterruptGuard();  // they act as at the process's start again
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// While alive, SIGXFSZ is ignored, as under an InterruptGuard: a write past
// a file-size limit fails with EFBIG (one clear line) instead of killing the
// process and leaving a temporary file behind. For commands that write files
// but are not interruptible runs (attention).
class FileSizeSignalGuard {
 public:
  FileSizeSignalGuard();
  ~FileSizeSignalGuard();
  FileSizeSignalGuard(const FileSizeSignalGuard&) = delete;
  FileSizeSignalGuard& operator=(const FileSizeSignalGuard&) = delete;
};

// The signal that asked to stop (SIGINT, SIGTERM or SIGHUP), 0 if none.
int interrupt_signal();
// From now until the InterruptGuard ends, the run has a checkpoint on disk: a
// second signal's message then says the last one is intact, not that there is none.
void set_checkpoint_exists();
// "SIGINT" / "SIGTERM" / "SIGHUP".
std::string signal_name(int signal);
// 128 + signal: the exit status shells report for a process killed by it.
int interrupt_exit_code(int signal);

}  // namespace attnlab::cli
