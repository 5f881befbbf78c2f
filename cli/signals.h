#pragma once
// Interrupting a training run cleanly. While an InterruptGuard lives, the
// first SIGINT or SIGTERM only raises a flag, which the training loop reads
// between steps: it finishes the step, writes a checkpoint and exits
// 128 + signal (130 for SIGINT, 143 for SIGTERM). A second one exits at once
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

// The signal that asked to stop (SIGINT or SIGTERM), 0 if none.
int interrupt_signal();
// "SIGINT" / "SIGTERM".
std::string signal_name(int signal);
// 128 + signal: the exit status shells report for a process killed by it.
int interrupt_exit_code(int signal);

}  // namespace attnlab::cli
