#pragma once
// A word for a command line that a user copies into a POSIX shell: the
// commands attnlab suggests (resume hints, config.ini's "repeat with" line)
// must work for paths with spaces, quotes or '$' in them.
#include <string>

namespace attnlab {

// `word` unchanged when it has only characters no shell treats specially
// (letters, digits and _ . / : = + - , @ %), else in single quotes, each '
// written as '\'' ("my runs/a" -> 'my runs/a'; "" -> '').
std::string shell_quote(const std::string& word);

}  // namespace attnlab
