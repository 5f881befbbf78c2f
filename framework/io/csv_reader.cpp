// The reader of framework/io/csv.h: what CsvWriter writes, read back.
#include <cstdlib>
#include <filesystem>

#include "framework/error.h"
#include "framework/io/atomic_file.h"
#include "framework/io/csv.h"

namespace attnlab {

namespace {

// Reads one record from text[i]; true with `i` past its line break, false
// (i unchanged) when the text ends first.
bool next_record(const std::string& text, size_t& i, CsvRecord& r) {
  r.fields.assign(1, std::string());
  r.begin = i;
  bool quoted = false;
  size_t kept = 0;  // leading characters of the field that were quoted (a CR among them is data)
  for (size_t k = i; k < text.size(); ++k) {
    const char c = text[k];
    std::string& field = r.fields.back();
    if (quoted) {
      if (c == '"' && k + 1 < text.size() && text[k + 1] == '"') field += text[++k];  // a doubled quote
      else if (c == '"') quoted = false, kept = field.size();
      else field += c;
    } else if (c == '"' && field.empty()) {
      quoted = true;
    } else if (c == ',') {
      r.fields.emplace_back();
      kept = 0;
    } else if (c == '\n') {
      if (field.size() > kept && field.back() == '\r') field.pop_back();  // CR LF
      r.end = i = k + 1;
      return true;
    } else {
      field += c;
    }
  }
  return false;
}

}  // namespace

std::vector<CsvRecord> csv_records(const std::string& text) {
  std::vector<CsvRecord> out;
  int64_t line = 1;
  for (size_t i = 0;;) {
    CsvRecord r;
    r.line = line;
    if (!next_record(text, i, r)) break;
    for (size_t k = r.begin; k < r.end; ++k) line += text[k] == '\n';
    out.push_back(std::move(r));
  }
  return out;
}

CsvTable read_csv(const std::string& path, uint64_t max_bytes) {
  const std::string text = read_file(path, max_bytes);
  std::vector<CsvRecord> records = csv_records(text);
  if (records.empty() || (records[0].fields.size() == 1 && records[0].fields[0].empty()))
    throw IoError(path + " has no header line");
  CsvTable table;
  table.dropped_last_line = records.back().end < text.size();
  table.columns = std::move(records[0].fields);
  for (size_t i = 1; i < records.size(); ++i) {
    if (records[i].fields.size() != table.columns.size())
      throw IoError(path + " line " + std::to_string(records[i].line) + " has " +
                    std::to_string(records[i].fields.size()) + " fields, its header " +
                    std::to_string(table.columns.size()));
    table.rows.push_back(std::move(records[i].fields));
  }
  return table;
}

void keep_csv_rows_through(const std::string& path, int64_t last_step) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  const std::string text = read_file(path);  // refuses a device or a FIFO
  std::string kept;
  for (const CsvRecord& r : csv_records(text)) {
    const std::string& first = r.fields[0];
    char* rest = nullptr;
    const long long step = std::strtoll(first.c_str(), &rest, 10);
    const bool a_step = !first.empty() && *rest == '\0';
    if (r.begin == 0 || (a_step && step <= last_step)) kept += text.substr(r.begin, r.end - r.begin);
  }
  write_file_atomic(path, kept);
}

}  // namespace attnlab
