#include "framework/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "framework/error.h"
#include "framework/io/test_point.h"

namespace attnlab {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& step, int err) {
  throw IoError("cannot write '" + path + "': " + step + ": " + std::strerror(err));
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Closes the descriptor and removes the temporary file unless released.
struct TempFile {
  int fd = -1;
  std::string name;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep && !name.empty()) ::unlink(name.c_str());
  }
};

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  if (path.empty() || path.back() == '/') throw IoError("cannot write '" + path + "': not a file path");
  const std::string dir = parent_dir(path);
  const std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);

  TempFile tmp;
  std::string pattern = dir + "/." + base + ".tmp.XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  tmp.fd = ::mkstemp(name.data());
  if (tmp.fd < 0) fail(path, "creating a temporary file in '" + dir + "'", errno);
  tmp.name = name.data();

  // mkstemp makes the file 0600; keep the old file's mode, else the usual 0644.
  struct stat old_stat;
  const mode_t mode = ::stat(path.c_str(), &old_stat) == 0 ? (old_stat.st_mode & 07777) : 0644;
  if (::fchmod(tmp.fd, mode) != 0) fail(path, "setting permissions", errno);

  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(tmp.fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "writing", errno);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(tmp.fd) != 0) fail(path, "fsync", errno);
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) fail(path, "closing", errno);
  test_point();  // a signal here leaves the temporary beside the old file
  if (::rename(tmp.name.c_str(), path.c_str()) != 0) fail(path, "renaming the temporary file", errno);
  tmp.keep = true;  // it is `path` now

  // Make the rename itself durable. The content is already in place, so a
  // directory that cannot be synced (some file systems refuse) is reported
  // but the new file stays.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd < 0) fail(path, "opening the directory to fsync it", errno);
  const int rc = ::fsync(dir_fd);
  const int err = errno;
  ::close(dir_fd);
  if (rc != 0 && err != EINVAL) fail(path, "fsync of the directory", err);
}

InputFile::InputFile(const std::string& path, const std::string& what)
    : path_(path), cannot_("cannot read " + (what.empty() ? "" : what + " ") + "'" + path + "'") {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, for ever.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail(std::strerror(errno));
  struct stat st;
  const int err = ::fstat(fd_, &st) != 0 ? errno : 0;
  // A device (/dev/zero never ends), a FIFO or a socket: no end to wait for.
  const char* problem = err ? std::strerror(err)
                        : S_ISDIR(st.st_mode) ? std::strerror(EISDIR)
                        : !S_ISREG(st.st_mode) ? "not a regular file (a device, pipe or socket)"
                                               : nullptr;
  if (problem) {
    ::close(fd_);  // the destructor does not run for a constructor that throws
    fail(problem);
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::fail(const std::string& problem) const { throw IoError(cannot_ + ": " + problem); }

std::string InputFile::read_up_to(uint64_t n) {
  std::string out;
  out.reserve(static_cast<size_t>(std::min<uint64_t>(n, size_ > position_ ? size_ - position_ : 0)));
  char chunk[1 << 16];
  while (out.size() < n) {
    const ssize_t got = ::read(fd_, chunk, static_cast<size_t>(std::min<uint64_t>(sizeof chunk, n - out.size())));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(std::strerror(errno));
    }
    if (got == 0) break;
    out.append(chunk, static_cast<size_t>(got));
    position_ += static_cast<uint64_t>(got);
  }
  return out;
}

std::string InputFile::read(uint64_t n) {
  std::string out = read_up_to(n);
  if (out.size() < n)
    fail("it ended after " + std::to_string(out.size()) + " of the " + std::to_string(n) + " bytes expected");
  return out;
}

std::string InputFile::read_rest(uint64_t max_bytes) {
  if (size_ > max_bytes)
    fail(std::to_string(size_) + " bytes, more than the " + std::to_string(max_bytes) + " such a file may hold");
  // One byte past the limit tells a file that grew since it was opened.
  std::string out = read_up_to(max_bytes == UINT64_MAX ? max_bytes : max_bytes + 1);
  if (out.size() > max_bytes) fail("more than the " + std::to_string(max_bytes) + " bytes such a file may hold");
  return out;
}

std::string read_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  return InputFile(path, what).read_rest(max_bytes);
}

void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos)
      std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace attnlab
