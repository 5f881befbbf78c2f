#pragma once
// Whole-file writes that never leave a half-written file behind, and whole-file reads.
#include <cstdint>
#include <string>

namespace attnlab {

// Writes `bytes` to a temporary file in the same directory as `path`, fsyncs
// it, renames it over `path` and fsyncs the directory, so after a crash the
// path holds either the old or the new content. The new file gets the old
// file's permissions, or 0644. On any failure the temporary file is removed,
// the previous file is left as it was, and IoError names the path, the step
// that failed and the system's reason.
void write_file_atomic(const std::string& path, const std::string& bytes);

// Removes the temporaries that a write_file_atomic killed mid-write left in
// `dir` (".NAME.tmp.XXXXXX"), and nothing else. Errors are ignored: a
// temporary that cannot be removed harms nothing.
void remove_stale_temporaries(const std::string& dir);

// A regular file open for reading, read in order. IoError "cannot read [WHAT]
// 'PATH': reason" when it cannot be opened or is not a regular file: a
// directory, a device (/dev/zero never ends), a FIFO (it waits for a writer)
// or a socket are refused at once, so that no read waits or grows for ever.
// Every file attnlab reads goes through it.
class InputFile {
 public:
  // `what` names the kind of file in messages ("config file"); may be empty.
  explicit InputFile(const std::string& path, const std::string& what = "");
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // when it was opened
  // The next n bytes; IoError when the file ends before them.
  std::string read(uint64_t n);
  // The rest of the file; IoError when it holds more than max_bytes.
  std::string read_rest(uint64_t max_bytes = UINT64_MAX);
  // Throws IoError "cannot read [WHAT] 'PATH': problem".
  [[noreturn]] void fail(const std::string& problem) const;

 private:
  std::string read_up_to(uint64_t n);

  int fd_ = -1;
  uint64_t size_ = 0, position_ = 0;
  std::string path_, cannot_;
};

// The whole content of a regular file (InputFile's refusals), at most
// max_bytes of it.
std::string read_file(const std::string& path, uint64_t max_bytes = UINT64_MAX, const std::string& what = "");

}  // namespace attnlab
