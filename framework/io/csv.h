#pragma once
// CSV logs of training runs: a header row, then one row per call, each
// flushed at once so a crash loses at most the row being written.
#include <cstdio>
#include <string>
#include <vector>

namespace attnlab {

class CsvWriter {
 public:
  // Creates (or truncates) `path` and writes the header; IoError naming the
  // path and the reason if it cannot. ValueError for no columns or a repeated column.
  CsvWriter(const std::string& path, const std::vector<std::string>& columns);
  // For resumed runs: appends to an existing file after checking that its
  // header is exactly `columns` (IoError naming both headers otherwise). An
  // incomplete last line (no newline: a crash mid-write) is cut off. A
  // missing or empty file is created with the header.
  static CsvWriter append(const std::string& path, const std::vector<std::string>& columns);

  CsvWriter(CsvWriter&& other) noexcept;
  CsvWriter& operator=(CsvWriter&& other) noexcept;
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;
  ~CsvWriter();

  // One row, as many values as columns (ValueError otherwise). Strings with a
  // comma, quote or line break are quoted as RFC 4180 says.
  void row(const std::vector<std::string>& values);
  // Numbers in the shortest form that reads back as the same double
  // ("0.1", "250", "nan", "inf").
  void row(const std::vector<double>& values);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& columns() const { return columns_; }

  static std::string format_number(double value);
  // `digits` decimals, fixed-point ("12.300"): elapsed seconds and the CLI's figures.
  static std::string format_fixed(double value, int digits);
  static std::string escape(const std::string& field);

 private:
  CsvWriter(std::string path, std::vector<std::string> columns, std::FILE* file);
  void write_line(const std::string& line);

  std::string path_;
  std::vector<std::string> columns_;
  std::FILE* file_ = nullptr;
};

}  // namespace attnlab
