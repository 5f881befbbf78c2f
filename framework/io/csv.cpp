#include "framework/io/csv.h"

#include <sstream>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "framework/error.h"
#include "framework/io/atomic_file.h"

namespace attnlab {

namespace {

std::string header_line(const std::vector<std::string>& columns) {
  if (columns.empty()) throw ValueError("CsvWriter: no columns");
  std::set<std::string> seen;
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].find_first_of("\r\n") != std::string::npos)
      throw ValueError("CsvWriter: column name '" + columns[i] + "' contains a line break");
    if (!seen.insert(columns[i]).second) throw ValueError("CsvWriter: column '" + columns[i] + "' appears twice");
    line += (i ? "," : "") + CsvWriter::escape(columns[i]);
  }
  return line + "\n";
}

std::FILE* open_or_throw(const std::string& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (!f) throw IoError("cannot open '" + path + "' for writing: " + std::strerror(errno));
  return f;
}

// The file's text with its header widened to `columns`, when its own columns
// are `columns` less some (an earlier attnlab's file: later ones only add
// columns), each row's values under their columns and the added ones empty;
// empty when it is not such a file.
std::string widened(const std::string& content, const std::vector<std::string>& columns) {
  const std::vector<CsvRecord> records = csv_records(content);
  if (records.empty()) return "";
  std::vector<size_t> at;  // where each old column goes
  size_t next = 0;
  for (const std::string& name : records[0].fields) {
    while (next < columns.size() && columns[next] != name) ++next;
    if (next == columns.size()) return "";
    at.push_back(next++);
  }
  std::string text = header_line(columns);
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].fields.size() != at.size()) return "";
    std::vector<std::string> row(columns.size());
    for (size_t k = 0; k < at.size(); ++k) row[at[k]] = CsvWriter::escape(records[r].fields[k]);
    for (size_t k = 0; k < row.size(); ++k) text += (k ? "," : "") + row[k];
    text += "\n";
  }
  return text;
}

}  // namespace

std::string CsvWriter::escape(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string CsvWriter::format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

CsvWriter::CsvWriter(std::string path, std::vector<std::string> columns, std::FILE* file)
    : path_(std::move(path)), columns_(std::move(columns)), file_(file) {}

CsvWriter::CsvWriter(const std::string& path, const std::vector<std::string>& columns) : path_(path), columns_(columns) {
  const std::string header = header_line(columns_);
  file_ = open_or_throw(path_, "wb");
  write_line(header);
}

CsvWriter CsvWriter::append(const std::string& path, const std::vector<std::string>& columns) {
  const std::string header = header_line(columns);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0) return CsvWriter(path, columns);

  std::string content = read_file(path);
  const size_t first_newline = content.find('\n');
  const std::string found = content.substr(0, first_newline == std::string::npos ? content.size() : first_newline + 1);
  if (found != header) {
    std::string wider = widened(content, columns);
    if (!wider.empty()) {  // an earlier attnlab's file: rewritten with the columns added since
      write_file_atomic(path, wider);
      return CsvWriter(path, columns, open_or_throw(path, "ab"));
    }
    auto show = [](std::string s) {
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      return "'" + s + "'";
    };
    throw IoError("cannot append to '" + path + "': its header " + show(found) + " differs from the expected " +
                  show(header));
  }
  // Cut an incomplete last row so new rows do not run into it.
  if (content.back() != '\n') {
    const size_t keep = content.find_last_of('\n') + 1;  // the header line ends in '\n', so keep >= its length
    std::filesystem::resize_file(path, keep, ec);
    if (ec) throw IoError("cannot truncate the incomplete last row of '" + path + "': " + ec.message());
  }
  return CsvWriter(path, columns, open_or_throw(path, "ab"));
}

CsvWriter::CsvWriter(CsvWriter&& other) noexcept
    : path_(std::move(other.path_)), columns_(std::move(other.columns_)), file_(other.file_) {
  other.file_ = nullptr;
}

CsvWriter& CsvWriter::operator=(CsvWriter&& other) noexcept {
  if (this != &other) {
    if (file_) std::fclose(file_);
    path_ = std::move(other.path_);
    columns_ = std::move(other.columns_);
    file_ = other.file_;
    other.file_ = nullptr;
  }
  return *this;
}

CsvWriter::~CsvWriter() {
  if (file_) std::fclose(file_);
}

void CsvWriter::write_line(const std::string& line) {
  if (!file_) throw IoError("CsvWriter for '" + path_ + "' is closed (moved from)");
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw IoError("cannot write to '" + path_ + "': " + std::strerror(errno));
}

void CsvWriter::row(const std::vector<std::string>& values) {
  if (values.size() != columns_.size())
    throw ValueError("CsvWriter '" + path_ + "': row has " + std::to_string(values.size()) + " values, expected " +
                     std::to_string(columns_.size()) + " (one per column)");
  std::string line;
  for (size_t i = 0; i < values.size(); ++i) line += (i ? "," : "") + escape(values[i]);
  write_line(line + "\n");
}

void CsvWriter::row(const std::vector<double>& values) {
  std::vector<std::string> text;
  text.reserve(values.size());
  for (double v : values) text.push_back(format_number(v));
  row(text);
}

std::string CsvWriter::format_fixed(double value, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << value;
  return out.str();
}

}  // namespace attnlab
