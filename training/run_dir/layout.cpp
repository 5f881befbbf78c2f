#include "training/run_dir/layout.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "framework/io/atomic_file.h"
#include "framework/io/checkpoint.h"
#include "training/checkpoints.h"

namespace attnlab {

namespace fs = std::filesystem;

namespace {

// The marker's one line: a format number, should the layout ever change.
const char* const kMarker = "attnlab run directory, format 1\n";
const char* const kAttentionMarkerText = "attnlab attention output, format 1\n";

// Files attnlab writes at the top of a run directory (the probe logs: framework/probe).
const std::set<std::string> kOwnFiles = {".attnlab-run", ".lock", "config.ini", "given_options.ini",
                                         "metrics.csv", "summary.json", "vocab.txt", "probe_params.csv",
                                         "probe_stream.csv", "probe_heads.csv", "probe_sharpness.csv",
                                         "probe_induction.csv", "embedding_fourier.csv",
                                         "report.html"};
const std::set<std::string> kOwnDirs = {"checkpoints", "attention"};

// NAME for ".NAME.tmp.XXXXXX", the temporary of write_file_atomic; otherwise `name` itself.
std::string without_temporary(const std::string& name) {
  const size_t at = name.find(".tmp.");
  if (name.size() > 1 && name[0] == '.' && at != std::string::npos && at > 1) return name.substr(1, at - 1);
  return name;
}

bool is_checkpoint_file(const std::string& name) {
  static const std::regex pattern(R"(step-[0-9]+(\.optim)?\.safetensors)");
  return std::regex_match(without_temporary(name), pattern);
}

// --tensorboard's files, named as TfEventsWriter names them (framework/io/tfevents.h).
bool is_own_file(const std::string& name) {
  static const std::regex events(R"(events\.out\.tfevents\.[0-9]+\.attnlab(\.[0-9]+)?)");
  return kOwnFiles.count(name) > 0 || std::regex_match(name, events);
}

void remove_own(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) throw IoError("cannot remove '" + path.string() + "': " + ec.message());
}

void remove_if_empty(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)) remove_own(dir);
}

// The files named in attention.json (what `attnlab attention` wrote there), and itself.
std::set<std::string> attention_files(const fs::path& dir) {
  std::set<std::string> files;
  std::error_code ec;
  if (!fs::exists(dir / "attention.json", ec)) return files;
  try {
    const nlohmann::json meta = nlohmann::json::parse(read_file((dir / "attention.json").string()));
    for (const auto& layer : meta.at("layers"))
      for (const auto& file : layer.at("files")) files.insert(file.get<std::string>());
  } catch (const std::exception&) {
    return {};  // not attnlab's: leave the directory alone
  }
  files.insert("attention.json");
  return files;
}

void remove_attention_maps(const fs::path& dir) {
  std::error_code ec;
  const std::set<std::string> own = attention_files(dir);
  std::vector<fs::path> files;
  if (!own.empty())
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (own.count(without_temporary(entry.path().filename().string()))) files.push_back(entry.path());
  for (const fs::path& file : files) remove_own(file);
  // The marker goes with the last of the maps; beside a user's file it stays.
  if (has_attention_marker(dir.string())) {
    size_t entries = 0;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++entries;
    if (!ec && entries == 1) remove_own(dir / kAttentionMarker);
  }
  remove_if_empty(dir);
}

}  // namespace

bool RunDir::has_marker() const {
  try {  // read_file: a marker that is a FIFO or a device is no marker, and is not waited on
    return read_file(marker_path(), 4096).rfind("attnlab run directory", 0) == 0;
  } catch (const IoError&) {
    return false;
  }
}

void RunDir::write_marker() const { write_file_atomic(marker_path(), kMarker); }

bool has_attention_marker(const std::string& dir) {
  const fs::path marker = fs::path(dir) / kAttentionMarker;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(marker, ec))) return false;
  try {
    return read_file(marker.string(), 4096).rfind("attnlab attention output", 0) == 0;
  } catch (const IoError&) {
    return false;
  }
}

void write_attention_marker(const std::string& dir) {
  write_file_atomic((fs::path(dir) / kAttentionMarker).string(), kAttentionMarkerText);
}

void remove_run_files(const RunDir& run) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(run.path(), ec)) {
    const std::string name = entry.path().filename().string(), base = without_temporary(name);
    if (name == ".attnlab-run" || name == ".lock") continue;
    if (is_own_file(base) && !entry.is_directory(ec)) files.push_back(entry.path());
  }
  for (const fs::path& file : files) remove_own(file);
  const fs::path checkpoints = run.checkpoint_dir();
  if (fs::is_directory(checkpoints, ec)) {
    files.clear();
    for (const auto& entry : fs::directory_iterator(checkpoints, ec))
      if (is_checkpoint_file(entry.path().filename().string())) files.push_back(entry.path());
    for (const fs::path& file : files) remove_own(file);
    remove_if_empty(checkpoints);
  }
  if (fs::is_directory(run.path() + "/attention", ec)) remove_attention_maps(run.path() + "/attention");
}

bool holds_only_own_files(const RunDir& run) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run.path(), ec)) {
    const std::string name = entry.path().filename().string();
    const bool own = entry.is_directory(ec) ? kOwnDirs.count(name) > 0 : is_own_file(without_temporary(name));
    if (!own) return false;
  }
  return !ec;
}

std::string RunDir::checkpoint_stem(int64_t step) const { return CheckpointStore(checkpoint_dir()).stem(step); }

std::vector<int64_t> RunDir::checkpoint_steps() const { return CheckpointStore(checkpoint_dir()).steps(); }

void RunDir::require_directory() const {
  std::error_code ec;
  const fs::file_status status = fs::status(path_, ec);
  if (fs::is_directory(status)) return;
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw IoError("run directory '" + path_ + "' cannot be opened: " + ec.message());
  if (fs::exists(status)) throw IoError("'" + path_ + "' is not a directory, so it is not a run directory");
  throw IoError("run directory '" + path_ + "' does not exist");
}

void RunDir::require_trained() const {
  std::error_code ec;
  require_directory();
  if (!fs::exists(config_path(), ec))
    throw IoError("'" + path_ + "' is not an attnlab run directory (no config.ini)");
  if (checkpoint_steps().empty()) throw IoError("run directory '" + path_ + "' has no checkpoint yet");
}

int64_t RunDir::latest_step() const {
  auto steps = checkpoint_steps();
  if (steps.empty()) throw IoError("run directory '" + path_ + "' has no checkpoint yet");
  return steps.back();
}

}  // namespace attnlab
