#pragma once
// Interrupting a training run cleanly. While an InterruptGuard lives, the
// first SIGINT, SIGTERM or SIGHUP only raises a flag, which the training loop
// reads between steps and between the batches of a held-out evaluation (which
// it then abandons): it finishes the step, writes a checkpoint and exits
// 128 + signal (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP: a closed
// terminal must not lose the run, so it stops as SIGTERM does, with the exit
// status shells report for a process that SIGHUP ends). A second one exits at once
// with that code; the checkpoint files are written atomically, so whatever is
// on disk stays loadable. SIGXFSZ is ignored, so a file-size limit makes the
// write fail with EFBIG (a clear error) instead of killing the process.
#include <string>

namespace attnlab::cli {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers
  ~InterruptGuard();  // restores the previous ones
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
// "SIGINT" / "SIGTERM" / "SIGHUP".
std::string signal_name(int signal);
// 128 + signal: the exit status shells report for a process killed by it.
int interrupt_exit_code(int signal);

}  // namespace attnlab::cli
