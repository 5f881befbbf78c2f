#pragma once
// Taking a run directory for one `attnlab train`, before anything is written
// into it: a new run creates it (or takes an empty one), writes the marker and
// holds its lock; --overwrite replaces only a marked run, in place and under
// its lock; --resume locks the run it continues. Anything else is refused with
// one line naming the path, the directory untouched.
#include <string>
#include <vector>

#include "training/run_dir/layout.h"
#include "training/run_dir/lock.h"

namespace attnlab {

class RunClaim {
 public:
  // A new run in `run`. ValueError/IoError (exit 2) for a directory that is
  // in use, not an attnlab run, or protected (see replace_refusal).
  static RunClaim start(const RunDir& run, bool overwrite);
  // The run `run` continues; IoError when it is in use or has no checkpoint.
  static RunClaim resume(const RunDir& run);

  // After a run failed before writing its first checkpoint: removes what this
  // run created (its files, and the marker, lock file and directories when it
  // created them), so nothing is left behind. A resumed run is left as it is.
  void undo();

 private:
  explicit RunClaim(const RunDir& run) : run_(run) {}

  RunDir run_;
  RunLock lock_;
  bool new_run_ = false;                   // start(): the run's files are this process's
  bool owns_directory_ = false;            // the marker (if written) and the lock file too
  std::vector<std::string> created_dirs_;  // the directories mkdir'd for it, outermost first
};

// Why --overwrite must not replace `path` whatever it holds ("it is the
// working directory", ...), or "" when it may look inside: the root, the
// working directory or one of its parents, $HOME or one of its parents.
std::string protected_path_reason(const std::string& path);

}  // namespace attnlab
