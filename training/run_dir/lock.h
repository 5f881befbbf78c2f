#pragma once
// One writer per run directory: an exclusive flock on RUN/.lock, taken before
// a run writes anything and held until the process ends. The kernel drops a
// flock when its holder dies, so a run killed by SIGKILL never blocks the
// next one; the pid written into the file only names the holder in messages,
// and is emptied again when the lock is released.
#include <string>

namespace attnlab {

class RunLock {
 public:
  RunLock() = default;
  // Locks `dir`/.lock (created if missing) and writes this process's pid into
  // it. IoError naming the holder's pid when another process holds the lock,
  // or naming the path and the reason when the file cannot be opened.
  static RunLock acquire(const std::string& dir);
  // The IoError of acquire() when a live process holds `dir`'s lock; creates
  // nothing, so it suits a directory that is then refused untouched.
  static void refuse_if_held(const std::string& dir);

  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

  bool held() const { return fd_ >= 0; }
  // Removes the lock file, then releases the lock: for undoing a run that
  // created its directory. A process that opened the old file meanwhile sees
  // it is no longer the directory's lock file (acquire checks) and refuses.
  void remove_file();

 private:
  RunLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void release();

  int fd_ = -1;
  std::string path_;
};

}  // namespace attnlab
