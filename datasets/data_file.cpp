#include "datasets/data_file.h"

#include <cctype>

#include "datasets/utf8.h"
#include "framework/error.h"
#include "framework/io/atomic_file.h"

namespace attnlab {

std::string read_data_file(const std::string& path) {
  // The path is kept in the checkpoints' JSON metadata, which holds only UTF-8.
  if (!is_utf8(path))
    throw ValueError("the file name " + TokenTable::quoted(path) +
                     " is not valid UTF-8, which a run's checkpoints cannot record; rename the file");
  std::string text = read_file(path);
  const std::string problem = utf8_text_problem(text);
  if (!problem.empty()) throw ValueError(path + " " + problem);
  text = without_bom(std::move(text));
  bool blank = true;
  for (char c : text) blank = blank && std::isspace(static_cast<unsigned char>(c));
  if (blank) throw ValueError(path + ": the file is empty" + std::string(text.empty() ? "" : " (whitespace only)"));
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    size_t stop = end;
    if (stop > start && text[stop - 1] == '\r') --stop;
    lines.push_back(text.substr(start, stop - start));
    start = end + 1;
  }
  return lines;
}

TokenTable initial_table(const TaskConfig& config, TokenTable::Mode mode) {
  if (config.vocab_path.empty()) return TokenTable(mode);
  TokenTable table = TokenTable::parse(read_file(config.vocab_path), config.vocab_path);
  if (table.mode() != mode)
    throw IoError(config.vocab_path + ": the saved vocabulary is of " +
                  (table.mode() == TokenTable::Mode::words ? "words" : "characters") + ", but task " + config.name +
                  " tokenizes into " + (mode == TokenTable::Mode::words ? "words" : "characters"));
  return table;
}

std::string file_line(const std::string& path, int64_t line) { return path + " line " + std::to_string(line) + ": "; }

}  // namespace attnlab
