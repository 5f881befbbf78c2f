#include "training/run_dir/lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <thread>

#include "framework/error.h"

namespace attnlab {

namespace {

// Whether `fd` is still the file at `path`: a failed fresh run removes its
// directory, lock file included, and another process may have opened the old
// file just before; its lock would then guard nothing.
bool is_file_at(int fd, const std::string& path) {
  struct stat opened {}, named {};
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
         opened.st_ino == named.st_ino;
}

// Who holds the lock, for the message: "attnlab process N" when the file
// names a live pid as attnlab writes it; "" when it names none (another
// program's flock, or a killed attnlab's stale line). The holder writes its
// pid just after taking the lock, so an empty file is read again for a
// moment before giving up.
std::string holder_of(int fd) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    char text[64] = {0};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    if (n > 0) {
      std::string line(text, static_cast<size_t>(n));
      line = line.substr(0, line.find('\n'));
      if (line.rfind("pid ", 0) != 0) return "";
      const pid_t pid = static_cast<pid_t>(std::atol(line.c_str() + 4));
      const bool alive = pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
      return alive ? "attnlab process " + std::to_string(pid) : "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
  }
  return "";
}

std::string in_use_message(const std::string& dir, const std::string& holder) {
  const std::string lock = dir + "/.lock", next = "; wait for it to end or stop it, or choose another --run";
  if (holder.empty())
    return "run directory '" + dir + "' is in use: a process of unknown pid, perhaps not attnlab, holds " + lock + next;
  return "run directory '" + dir + "' is in use by " + holder + " (it holds " + lock + ")" + next;
}

void write_pid(int fd) {
  const std::string text = "pid " + std::to_string(::getpid()) + "\n";
  // The pid only names the holder in messages: a failed write loses nothing.
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, text.data(), text.size(), 0);
}

}  // namespace

RunLock RunLock::acquire(const std::string& dir) {
  const std::string path = dir + "/.lock";
  for (int attempt = 0; attempt < 3; ++attempt) {
    // Never through a symlink, never a FIFO or device: the pid is written into what is opened.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0 && errno == ELOOP)
      throw IoError("cannot lock run directory '" + dir + "': " + path + " is a symlink, not attnlab's lock file");
    if (fd < 0) throw IoError("cannot lock run directory '" + dir + "': " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw IoError("cannot lock run directory '" + dir + "': " + path + " is not a regular file");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      const std::string holder = error == EWOULDBLOCK ? holder_of(fd) : "";
      ::close(fd);
      if (error != EWOULDBLOCK)
        throw IoError("cannot lock run directory '" + dir + "': " + path + ": " + std::strerror(error));
      throw IoError(in_use_message(dir, holder));
    }
    if (is_file_at(fd, path)) {
      write_pid(fd);
      return RunLock(fd, path);
    }
    ::close(fd);  // the file was removed or replaced between open and flock: look again
  }
  throw IoError("run directory '" + dir + "' keeps being replaced by another process while attnlab locks it");
}

void RunLock::refuse_if_held(const std::string& dir) {
  const std::string path = dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return;  // none (or a symlink: acquire refuses it)
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  const std::string holder = held ? holder_of(fd) : "";
  ::close(fd);  // drops the shared lock, if it was taken
  if (held) throw IoError(in_use_message(dir, holder));
}

RunLock::RunLock(RunLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

RunLock::~RunLock() { release(); }

void RunLock::release() {
  if (fd_ < 0) return;
  // Empty again: a run that ends (or is refused, e.g. for a corrupt
  // checkpoint) leaves the lock file as it found it; only a killed holder's
  // pid stays, and a pid never blocks anyone.
  (void)!::ftruncate(fd_, 0);
  ::close(fd_);  // closing the last descriptor drops the flock
  fd_ = -1;
}

void RunLock::remove_file() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still locked: nobody takes a lock on a file about to go
  release();
}

}  // namespace attnlab
