#pragma once
// Standard output as the commands write it (std::cout), through a buffer on
// file descriptor 1 that keeps the reason its first write failed: by the time
// a command ends and says its output was lost, errno has long been
// overwritten (a full disk reported as "No such file or directory").

namespace attnlab::cli {

// std::cout writes through that buffer from now on: before any output.
void capture_standard_output();

// Writes what is buffered; then 0 when all output reached its destination,
// else the errno of the first write that failed (EIO if it wrote nothing
// without saying why).
int standard_output_error();

}  // namespace attnlab::cli
