#pragma once
// Decisions that the processes of an `mpirun` job take together. A refusal
// that one rank alone meets (the run directory's claim or lock, an edited
// config.ini, a file only it reads) must reach every rank: a rank that goes
// on to wait in a collective for a rank that has quit waits forever.
#include <functional>
#include <string>

#include "training/distributed/communicator.h"

namespace attnlab::cli {

// Runs `decide` on every process and agrees on the outcome. When it throws on
// any process, the error of the lowest such rank is printed once, by rank 0,
// before any process ends, and every process throws ReportedFailure with that
// error's exit code (cli/commands.h). One process: the exception as thrown.
void decide_together(const Communicator& communicator, const std::string& command, const std::function<void()>& decide);

// For an error thrown after the processes began training, when the others
// may be inside a collective: this process prints its line (whatever its
// rank) and ends the whole job with its exit code. One process: rethrows.
[[noreturn]] void end_every_process(const Communicator& communicator, const std::string& command);

}  // namespace attnlab::cli
