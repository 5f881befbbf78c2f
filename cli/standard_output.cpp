#include "cli/standard_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <streambuf>

namespace attnlab::cli {

namespace {

// Line by line to a terminal (a prompt or a note on stderr shows in order),
// in blocks otherwise, as C's stdout would.
class RecordingBuffer : public std::streambuf {
 public:
  RecordingBuffer() : lines_(::isatty(STDOUT_FILENO) == 1) { setp(buffer_, buffer_ + sizeof buffer_); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
    if (lines_ && c == '\n' && !drain()) return traits_type::eof();
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const std::streamsize put = std::streambuf::xsputn(s, n);
    if (lines_ && std::memchr(s, '\n', static_cast<size_t>(put)) && !drain()) return 0;
    return put;
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  // Writes the buffer out; false, with the reason kept, when it cannot. What
  // could not be written is dropped: the stream is failed from then on.
  bool drain() {
    const char* from = pbase();
    const char* const end = pptr();
    setp(buffer_, buffer_ + sizeof buffer_);
    while (from < end) {
      const ssize_t n = ::write(STDOUT_FILENO, from, static_cast<size_t>(end - from));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (error_ == 0) error_ = n < 0 ? errno : EIO;
        return false;
      }
      from += n;
    }
    return error_ == 0;
  }

  char buffer_[8192];
  int error_ = 0;
  bool lines_;
};

// Never destroyed: std::cout is flushed into it when the process exits.
RecordingBuffer* recording = nullptr;

}  // namespace

void capture_standard_output() {
  if (recording) return;
  recording = new RecordingBuffer();
  std::cout.rdbuf(recording);
}

int standard_output_error() {
  std::cout.flush();
  if (recording && recording->error() != 0) return recording->error();
  return std::cout.good() ? 0 : EIO;
}

}  // namespace attnlab::cli
