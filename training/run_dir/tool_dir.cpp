#include "training/run_dir/tool_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "framework/error.h"
#include "framework/io/atomic_file.h"
#include "training/run_dir/claim.h"
#include "training/run_dir/layout.h"

namespace attnlab {

namespace fs = std::filesystem;

namespace {

const char* tool_of(ToolKind kind) { return kind == ToolKind::kSweep ? "scripts/tools/sweep.py" : "scripts/tools/tune.py"; }
const char* what_of(ToolKind kind) { return kind == ToolKind::kSweep ? "sweep directory" : "tuning study directory"; }
// The marker's one line, with a format number should the layout ever change.
std::string marker_text(ToolKind kind) { return std::string("attnlab ") + what_of(kind) + ", format 1\n"; }

// `path` without trailing slashes ("sweep/" names the link sweep, not its target).
fs::path without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The directories that creating `dir` makes, innermost first.
std::vector<fs::path> missing_directories(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(fs::symlink_status(p, ec));
       p = p.parent_path()) {
    out.push_back(p);
    if (p == p.parent_path()) break;
  }
  return out;
}

// An exclusive flock on the directory while the claim looks and marks: two
// tools started together never both find it empty, nor one the other's marker half-written.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0)
      throw IoError("cannot open '" + dir + "' to claim it: " + std::strerror(errno));
  }
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_;
};

// Why a directory that is not marked as `kind`'s may not be taken, or "" when
// it is empty (a temporary a killed claim left of the marker counts as nothing).
std::string unmarked_refusal(const std::string& dir, ToolKind kind) {
  const std::string marker = tool_marker_name(kind), stale = "." + marker + ".tmp.";
  const ToolKind other = kind == ToolKind::kSweep ? ToolKind::kStudy : ToolKind::kSweep;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(fs::path(dir) / marker, ec)))
    return "its " + marker + " is not the marker attnlab writes (a symbolic link, another kind of file, or other content)";
  if (has_tool_marker(dir, other))
    return std::string("it is ") + tool_of(other) + "'s " + what_of(other) + " (" + tool_marker_name(other) + "), not a " +
           what_of(kind);
  if (RunDir(dir).has_marker()) return "it is an attnlab run directory (.attnlab-run)";
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind(stale, 0) != 0)
      return std::string("it holds files and is not a ") + what_of(kind) + " (no " + marker +
             " marker); choose a new or empty directory";
  if (ec) return "it cannot be read: " + ec.message();
  return "";
}

// In a marked directory every entry the tool may write through must be its own: no symbolic link at all.
std::string symlink_inside(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (fs::is_symlink(entry.symlink_status(ec)))
      return "its " + entry.path().filename().string() + " is a symbolic link (the tool does not write through one)";
  return ec ? "it cannot be read: " + ec.message() : "";
}

}  // namespace

const ChoiceNames<ToolKind>& choice_names(ToolKind) {
  static const ChoiceNames<ToolKind> names = {{ToolKind::kSweep, "sweep"}, {ToolKind::kStudy, "study"}};
  return names;
}

std::string tool_marker_name(ToolKind kind) { return ".attnlab-" + name_of(kind); }

bool has_tool_marker(const std::string& dir, ToolKind kind) {
  const fs::path marker = fs::path(dir) / tool_marker_name(kind);
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(marker, ec))) return false;
  try {
    return read_file(marker.string(), 4096) == marker_text(kind);
  } catch (const IoError&) {
    return false;
  }
}

void claim_tool_directory(const std::string& dir, ToolKind kind) {
  if (dir.empty()) throw ValueError("--out needs a path, got an empty one");
  const std::string refuses = "--out refuses to write into '" + dir + "': ";
  if (std::string why = protected_path_reason(dir); !why.empty()) throw ValueError(refuses + "it is " + why);
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(without_trailing_slashes(dir), ec);
  if (fs::is_symlink(link))
    throw ValueError(refuses + "it is a symbolic link (attnlab's tools do not write through one); name its target itself");
  if (fs::exists(link) && !fs::is_directory(link)) throw ValueError(refuses + "it is not a directory");
  const std::vector<fs::path> created = missing_directories(dir);
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create '" + dir + "': " + ec.message());
  const auto undo = [&] {  // only what this call made, and only while empty
    std::error_code ignored;
    for (const fs::path& p : created) fs::remove(p, ignored);
  };
  try {
    DirectoryLock lock(dir);
    if (has_tool_marker(dir, kind)) {
      if (std::string why = symlink_inside(dir); !why.empty()) throw ValueError(refuses + why);
      return;
    }
    if (std::string why = unmarked_refusal(dir, kind); !why.empty()) throw ValueError(refuses + why);
    remove_stale_temporaries(dir);
    write_file_atomic((fs::path(dir) / tool_marker_name(kind)).string(), marker_text(kind));
  } catch (...) {
    undo();
    throw;
  }
}

}  // namespace attnlab
