#pragma once
// A column of a run's metrics.csv, for the CLI tests that read one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "framework/io/csv.h"

namespace attnlab::testing {

// The cells of column `name` of RUN/metrics.csv, one per row (REQUIRE: the column exists).
inline std::vector<std::string> metrics_column(const std::string& run, const std::string& name) {
  const CsvTable t = read_csv(run + "/metrics.csv", 1 << 20);
  const auto at = std::find(t.columns.begin(), t.columns.end(), name);
  REQUIRE(at != t.columns.end());
  std::vector<std::string> out;
  for (const auto& row : t.rows) out.push_back(row[static_cast<size_t>(at - t.columns.begin())]);
  return out;
}

}  // namespace attnlab::testing
