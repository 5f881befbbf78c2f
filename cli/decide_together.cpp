#include "cli/decide_together.h"

#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>

#include "cli/commands.h"

namespace attnlab::cli {

void decide_together(const Communicator& communicator, const std::string& command, const std::function<void()>& decide) {
  std::optional<Failure> local;
  try {
    decide();
  } catch (...) {
    if (communicator.size() == 1) throw;
    local = describe_failure(command, std::current_exception());
  }
  if (communicator.size() == 1) return;
  const int first = communicator.min(local ? communicator.rank() : communicator.size());
  if (first == communicator.size()) return;
  // The exit code, a newline, the line: from the first failing rank to all.
  const std::string agreed = communicator.broadcast(local ? std::to_string(local->code) + "\n" + local->line : "", first);
  const size_t newline = agreed.find('\n');
  if (communicator.is_root()) std::cerr << agreed.substr(newline + 1) << '\n' << std::flush;
  communicator.any(true);  // a barrier: no process ends (and lets mpirun end the job) before the line is out
  throw ReportedFailure{std::stoi(agreed.substr(0, newline))};
}

void end_every_process(const Communicator& communicator, const std::string& command) {
  if (communicator.size() == 1) throw;
  const Failure f = describe_failure(command, std::current_exception());
  std::cerr << f.line << '\n' << std::flush;
  communicator.abort(f.code);
  std::exit(f.code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

}  // namespace attnlab::cli
