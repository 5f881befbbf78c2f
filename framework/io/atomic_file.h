#pragma once
// Whole-file writes that never leave a half-written file behind, and whole-file reads.
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

// The whole content of a file; IoError naming the path and the reason.
std::string read_file(const std::string& path);

}  // namespace attnlab
