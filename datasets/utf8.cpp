#include "datasets/utf8.h"

#include <algorithm>
#include <cstdio>

namespace attnlab {

namespace {

// The length of the well-formed UTF-8 sequence at text[i], or 0 when none
// starts there; `seen` gets how many bytes were read to decide it.
size_t sequence_length(const std::string& text, size_t i, size_t& seen) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  seen = 1;
  if (lead < 0x80) return 1;
  size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte (table 3-7)
  if (lead >= 0xC2 && lead <= 0xDF) n = 2;
  else if (lead == 0xE0) n = 3, low = 0xA0;
  else if (lead == 0xED) n = 3, high = 0x9F;  // not a surrogate
  else if (lead >= 0xE1 && lead <= 0xEF) n = 3;
  else if (lead == 0xF0) n = 4, low = 0x90;
  else if (lead == 0xF4) n = 4, high = 0x8F;  // not past U+10FFFF
  else if (lead >= 0xF1 && lead <= 0xF3) n = 4;
  else return 0;
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= text.size()) return 0;
    seen = k + 1;
    const unsigned char c = byte(i + k);
    if (c < (k == 1 ? low : 0x80) || c > (k == 1 ? high : 0xBF)) return 0;
  }
  return n;
}

std::string hex(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", c);
  return buf;
}

}  // namespace

std::string utf8_text_problem(const std::string& text) {
  int64_t line = 1;
  auto where = [&](size_t i) {
    return "line " + std::to_string(line) + " (byte offset " + std::to_string(i) + "): ";
  };
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\0') return where(i) + "a NUL byte (0x00), so this is not a text file";
    size_t seen = 0;
    const size_t n = sequence_length(text, i, seen);
    if (n == 0) {
      std::string bytes;
      for (size_t k = 0; k < seen; ++k) bytes += (k ? " " : "") + hex(static_cast<unsigned char>(text[i + k]));
      return where(i) + "not valid UTF-8 (" + (seen == 1 ? "byte " : "bytes ") + bytes +
             "); attnlab reads data files as UTF-8 text (convert it first, e.g. with iconv)";
    }
    if (text[i] == '\n') ++line;
    i += n;
  }
  return "";
}

bool is_utf8(const std::string& text) {
  for (size_t i = 0, seen = 0; i < text.size();) {
    const size_t n = sequence_length(text, i, seen);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string without_bom(std::string text) {
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  return text;
}

}  // namespace attnlab
