#pragma once
// The directory one of attnlab's tools writes (scripts/tools/sweep.py's sweep,
// scripts/tools/tune.py's study), owned by the rule that run directories and
// attention outputs follow: the tool takes a missing or empty directory and
// marks it as its own (.attnlab-sweep, .attnlab-study); it continues in a
// directory carrying its own marker (an interrupted sweep or study); it
// refuses anything else (a user's directory, a run directory, the other
// tool's directory, a file, a symbolic link as the directory or inside it).
// The Python tools ask `attnlab claim-dir` (cli/claim_dir.cpp) rather than
// apply a second copy of the rule.
#include <string>

#include "framework/choices.h"

namespace attnlab {

// The tool a directory is for, named "sweep" or "study" (framework/choices.h).
enum class ToolKind { kSweep, kStudy };
const ChoiceNames<ToolKind>& choice_names(ToolKind);
std::string tool_marker_name(ToolKind kind);  // ".attnlab-" + its name: ".attnlab-sweep", ".attnlab-study"

// Whether `dir` carries `kind`'s marker as a regular file (a symlink is none).
bool has_tool_marker(const std::string& dir, ToolKind kind);

// Claims `dir` for a tool of `kind` as described above, creating it (and its
// missing parents) and writing the marker when it is new. Tools started at the
// same moment on one directory are serialised by a lock on it: one marks it,
// the others then find it marked. ValueError naming the path and what it is
// for a directory that is not the tool's; IoError when it cannot be created
// or marked (what this call created is removed again).
void claim_tool_directory(const std::string& dir, ToolKind kind);

}  // namespace attnlab
