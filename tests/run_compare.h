#pragma once
// Two run directories compared file by file, time fields aside: what a run
// continued after a stop must share with the run that never stopped.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "framework/io/safetensors.h"
#include "tests/child_process.h"
#include "tests/cli_harness.h"

namespace attnlab::testing {

namespace fs = std::filesystem;

// A file's content without what differs between two runs of the same bits:
// metrics.csv's times, summary.json's seconds and traffic, a checkpoint's elapsed_s
// (and the checksum of the metadata holding it).
inline std::string timeless(const fs::path& file) {
  const std::string name = file.filename().string();
  if (name == "metrics.csv") return metrics_without_times(file.string());
  if (name == "summary.json") {
    nlohmann::json summary = nlohmann::json::parse(slurp(file.string()));
    summary.erase("seconds");
    // Measurements of the steps the last process ran (none when it only finished an owed evaluation).
    for (const char* key : {"comm_bytes_per_step", "comm_bytes_received_per_step", "comm_bytes_sent_per_step",
                            "comm_seconds_per_step"})
      summary.erase(key);
    return summary.dump();
  }
  if (file.extension() != ".safetensors") return slurp(file.string());
  SafetensorsData data = load_safetensors(file.string());
  data.metadata.erase("elapsed_s");
  data.metadata.erase("metadata_checksum");  // it covers elapsed_s
  std::string out = nlohmann::json(data.metadata).dump();
  for (const auto& [tensor, t] : data.tensors)
    out += tensor + std::string(reinterpret_cast<const char*>(t.data()), sizeof(*t.data()) * static_cast<size_t>(t.numel()));
  return out;
}

inline std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (!entry.is_directory()) out.push_back(fs::relative(entry.path(), root).string());
  std::sort(out.begin(), out.end());
  return out;
}

// The first difference between two run directories, or "".
inline std::string run_difference(const fs::path& expected, const fs::path& actual) {
  const std::vector<std::string> want = files_under(expected), have = files_under(actual);
  if (want != have) {
    std::string listed;
    for (const std::string& f : have) listed += " " + f;
    return "files differ; the continued run holds:" + listed;
  }
  for (const std::string& f : want)
    if (timeless(expected / f) != timeless(actual / f)) return f + " differs";
  return "";
}

}  // namespace attnlab::testing
