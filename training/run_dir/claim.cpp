#include "training/run_dir/claim.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "framework/io/atomic_file.h"
#include "framework/io/shell_quote.h"
#include "framework/io/test_point.h"
#include "framework/error.h"

namespace attnlab {

namespace fs = std::filesystem;

namespace {

// The temporary of the marker's write_file_atomic, "..attnlab-run.tmp.XXXXXX".
bool is_marker_temporary(const std::string& name) { return name.rfind("..attnlab-run.tmp.", 0) == 0; }

// Empty but for a lock file and a marker not yet renamed into place: what a
// run leaves when a second signal ends it between making the directory and
// marking it. Nobody's run yet, so a new run takes it (and --overwrite too).
bool holds_only_lock(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != ".lock" && !(is_marker_temporary(name) && entry.is_regular_file(ec))) return false;
  }
  return !ec;
}

// Whether `outer` is `inner` or one of its parents (both absolute, canonical).
bool contains(const fs::path& outer, const fs::path& inner) {
  return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

fs::path resolved(const std::string& path, std::error_code& ec) {
  const fs::path absolute = fs::absolute(path, ec);
  return ec ? fs::path() : fs::weakly_canonical(absolute, ec);
}

// Why a directory that exists may not be replaced by --overwrite, or "".
std::string replace_refusal(const RunDir& run) {
  if (std::string why = protected_path_reason(run.path()); !why.empty()) return "it is " + why;
  std::error_code ec;
  const bool has_config = fs::exists(run.config_path(), ec);
  if (!run.has_marker())
    return has_config ? "it has config.ini but no .attnlab-run marker (a run of an older attnlab, or not attnlab's); "
                        "delete it yourself if you no longer need it, or choose another --run"
                      : "it is not an attnlab run directory (no .attnlab-run marker)";
  if (!has_config && !holds_only_own_files(run)) return "it has no config.ini and holds files attnlab did not write";
  return "";
}

// The refusal of a new run into an existing directory without --overwrite.
std::string existing_message(const RunDir& run) {
  RunLock::refuse_if_held(run.path());  // a live run: say so rather than how to replace it
  const std::string& path = run.path();
  std::error_code ec;
  if (run.has_marker() && !run.checkpoint_steps().empty())
    return "run directory '" + path + "' already exists; use --resume " + shell_quote(path) + ", another --run, or --overwrite";
  if (run.has_marker())
    return "run directory '" + path + "' holds a run that stopped before its first checkpoint (nothing to resume); "
           "start it again with --overwrite, or choose another --run";
  if (fs::exists(run.config_path(), ec))
    return "run directory '" + path + "' already exists (a run of an older attnlab: config.ini, no .attnlab-run "
           "marker); use --resume " + shell_quote(path) + " or another --run (--overwrite replaces only marked runs)";
  return "'" + path + "' already exists and is not an attnlab run directory; choose another --run";
}

std::string no_checkpoint_message(const RunDir& run) {
  const std::string& path = run.path();
  const std::string head = "run directory '" + path + "' has no checkpoint yet: it stopped before its first one, so "
                           "there is nothing to resume; ";
  if (run.has_marker())
    return head + "start it again with: attnlab train --config " + shell_quote(run.config_path()) + " --run " +
               shell_quote(path) + " --overwrite";
  return head + "it has no .attnlab-run marker (an older attnlab's run), so --overwrite will not replace it: delete it "
                "yourself, or choose another --run";
}

// `path` with control characters written as \xNN, for a message on one line.
std::string printable(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
    out += escaped;
  }
  return out;
}

// mkdir -p that remembers what it made, so a failed run can remove exactly that.
std::vector<std::string> make_directories(const std::string& path) {
  std::vector<std::string> created;
  fs::path prefix;
  for (const fs::path& part : fs::path(path)) {
    prefix /= part;
    if (part.empty() || part == "." || part == ".." || prefix == prefix.root_path()) continue;
    if (::mkdir(prefix.c_str(), 0777) == 0) {
      created.push_back(prefix.string());
    } else if (errno != EEXIST) {
      const int error = errno;
      for (auto dir = created.rbegin(); dir != created.rend(); ++dir) ::rmdir(dir->c_str());
      throw IoError("cannot create run directory '" + path + "': " + std::strerror(error));
    }
  }
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw IoError("cannot create run directory '" + path + "': a file of that name exists");
  return created;
}

}  // namespace

std::string protected_path_reason(const std::string& path) {
  std::error_code ec;
  const fs::path target = resolved(path, ec);
  if (ec) return "";
  if (target == target.root_path()) return "the root directory";
  const fs::path cwd = fs::current_path(ec);
  if (!ec && target == cwd) return "the working directory";
  if (!ec && contains(target, cwd)) return "a parent of the working directory";
  const char* home_env = std::getenv("HOME");
  if (!home_env || !*home_env) return "";
  const fs::path home = resolved(home_env, ec);
  if (!ec && target == home) return "the home directory ($HOME)";
  if (!ec && contains(target, home)) return "a parent of the home directory ($HOME)";
  return "";
}

RunClaim RunClaim::start(const RunDir& run, bool overwrite) {
  const std::string& path = run.path();
  // config.ini, metrics.csv and the commands attnlab suggests hold the path on one line.
  for (size_t i = 0; i < path.size(); ++i)
    if (static_cast<unsigned char>(path[i]) < 0x20 || path[i] == 0x7f)
      throw ValueError("run directory '" + printable(path) + "' has a control character (byte " +
                       std::to_string(static_cast<int>(path[i])) + " at offset " + std::to_string(i) +
                       "); choose a name without newlines or tabs");
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    throw IoError("cannot create run directory '" + path + "': a file of that name exists");
  if (ec == std::errc::too_many_symbolic_link_levels) run.require_directory();  // says so
  if (overwrite)
    if (std::string why = protected_path_reason(path); !why.empty())
      throw ValueError("--overwrite refuses to replace '" + path + "': it is " + why);
  RunClaim claim(run);
  claim.new_run_ = true;
  if (fs::is_directory(path, ec) && !holds_only_lock(path)) {
    if (!overwrite) throw ValueError(existing_message(run));
    if (std::string why = replace_refusal(run); !why.empty())
      throw ValueError("--overwrite refuses to replace '" + path + "': " + why);
    // Replaced in place, under the run's own lock: no moment without a lock,
    // and files the user added to the run (notes, plots) stay.
    claim.lock_ = RunLock::acquire(path);
    remove_run_files(run);
    return claim;
  }
  claim.created_dirs_ = make_directories(path);
  test_point();
  // Two new runs may both have found the directory missing or empty: the one
  // that locks it first writes the marker, the other then sees it and stops.
  claim.lock_ = RunLock::acquire(path);
  test_point();
  if (!holds_only_lock(path))
    throw ValueError("run directory '" + path + "' was started by another attnlab process a moment ago; choose another --run");
  claim.owns_directory_ = true;  // nothing in it but this run's lock: what it holds from here on is this run's
  try {
    remove_stale_temporaries(path);  // a marker's, left by a process ended at once (holds_only_lock)
    run.write_marker();
  } catch (const IoError&) {  // a full disk: the caller never gets a claim to undo, so undo here
    claim.undo();
    throw;
  }
  return claim;
}

RunClaim RunClaim::resume(const RunDir& run) {
  std::error_code ec;
  run.require_directory();
  // A live run replacing this one with --overwrite removes config.ini before it
  // writes its own: name that run rather than call the directory no run.
  RunLock::refuse_if_held(run.path());
  if (!fs::exists(run.config_path(), ec))
    throw IoError("'" + run.path() + "' is not an attnlab run directory (no config.ini)");
  RunClaim claim(run);
  claim.lock_ = RunLock::acquire(run.path());
  if (run.checkpoint_steps().empty()) throw IoError(no_checkpoint_message(run));
  return claim;
}

void RunClaim::undo() {
  if (!new_run_) return;
  try {
    remove_run_files(run_);
  } catch (const IoError&) {
    // Best effort: the run's own failure is the error to report.
  }
  if (owns_directory_) {  // the marker may be missing (its write failed): removing it is then a no-op
    std::error_code ec;
    fs::remove(run_.marker_path(), ec);
    lock_.remove_file();
  }
  for (auto dir = created_dirs_.rbegin(); dir != created_dirs_.rend(); ++dir) ::rmdir(dir->c_str());  // only if empty
}

}  // namespace attnlab
