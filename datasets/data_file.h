#pragma once
// Reading the files behind the pairs and text tasks.
#include <string>
#include <vector>

#include "datasets/task.h"
#include "datasets/token_table.h"

namespace attnlab {

// The text of a data file, without a BOM at its start. IoError naming the
// path when it cannot be read or is not a regular file; ValueError naming it
// when it holds nothing but whitespace, and naming the line and byte offset
// of the first byte that is not UTF-8 text (datasets/utf8.h), or when the
// path itself is not UTF-8: decided at load, before any training.
// Line ends are the file's own: pairs reads "\r\n" as "\n" (split_lines),
// text keeps every character, "\r" included.
std::string read_data_file(const std::string& path);

// Its lines without their ends ("\n", "\r\n"); numbered from 1 by position.
std::vector<std::string> split_lines(const std::string& text);

// The vocabulary to use: the run's saved table when config.vocab_path is
// set (IoError naming that file when it is unreadable or malformed, or is of
// another tokenization), else an empty table that the training file fills.
TokenTable initial_table(const TaskConfig& config, TokenTable::Mode mode);

// "PATH line N: " -- the prefix of every complaint about a line.
std::string file_line(const std::string& path, int64_t line);

}  // namespace attnlab
