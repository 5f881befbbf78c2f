#pragma once
// Typed errors a user can cause. The CLI turns each into one line on stderr.
#include <cstddef>
#include <stdexcept>
#include <string>

namespace attnlab {

// A shape that does not fit an operation: the message names the shapes.
struct ShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// A value out of range or inconsistent with others (sizes, flags, options).
struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// A file that is missing, unreadable, truncated, corrupt or of the wrong kind.
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A number for a message, with 17 significant digits so that the value shown
// is exactly the value refused ("lr must be > 0, got -0.001").
std::string exact_text(double v);

// A user's value as a message shows it: whole up to `keep` bytes, else its
// first `keep` bytes (cut at a UTF-8 character's start) and "... (N bytes)",
// so that a 100 KB token or line is not echoed whole on stderr.
constexpr size_t kShownBytes = 60;
std::string shortened(const std::string& value, size_t keep = kShownBytes);

}  // namespace attnlab
