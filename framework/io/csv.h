#pragma once
// CSV logs of training runs: a header row, then one row per call, each
// flushed at once so a crash loses at most the row being written; and the one
// reader of them (and of the CSVs Python's csv module writes), below.
#include <cstdint>
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
  // header is exactly `columns` (IoError naming both headers otherwise). A
  // file whose columns are `columns` less some (one an earlier attnlab wrote,
  // before columns were added) is first rewritten, atomically, with the full
  // header and the added columns empty. An incomplete last line (no newline:
  // a crash mid-write) is cut off. A missing or empty file is created with
  // the header.
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

// One record of a CSV text: comma-separated fields; a field in double quotes
// may hold commas, line breaks and quotes (doubled), as CsvWriter::escape
// writes them. A line may end in LF or CR LF (Python's csv module).
struct CsvRecord {
  std::vector<std::string> fields;
  size_t begin = 0, end = 0;  // its bytes in the text, [begin, end), its line break included
  int64_t line = 1;           // the line it starts on, from 1
};

// The complete records of `text`, in order; an unterminated last one (a
// writer stopped mid-row) is left out.
std::vector<CsvRecord> csv_records(const std::string& text);

// A CSV file: its header's fields and its rows.
struct CsvTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  // The file ended in an unterminated line (a writer still writing, or cut
  // off mid-row), which is not among the rows.
  bool dropped_last_line = false;
};
// Reads `path` whole (read_file: at most max_bytes). IoError naming the file
// when it has no header, or a row has another number of fields than the
// header (naming its line). An unterminated last line is left out and
// dropped_last_line says so.
CsvTable read_csv(const std::string& path, uint64_t max_bytes);

// A resumed run redoes the steps after its checkpoint: rewrites `path`
// (atomically; nothing when it does not exist) with its header and the
// complete rows whose first field, the step, is at most `last_step`.
void keep_csv_rows_through(const std::string& path, int64_t last_step);

}  // namespace attnlab
