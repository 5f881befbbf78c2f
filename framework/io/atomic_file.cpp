#include "framework/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "framework/error.h"

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

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw IoError("cannot read '" + path + "': " + std::strerror(errno));
  struct stat st;
  const int stat_rc = ::fstat(fd, &st);
  if (stat_rc != 0 || S_ISDIR(st.st_mode)) {
    const int err = stat_rc != 0 ? errno : EISDIR;
    ::close(fd);
    throw IoError("cannot read '" + path + "': " + std::strerror(err));
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw IoError("cannot read '" + path + "': " + std::strerror(err));
    }
    if (n == 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
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
