#pragma once
// Running the attnlab executable from tests, in scratch directories.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "framework/io/safetensors.h"

namespace attnlab::testing {

struct CliResult {
  int code;         // exit code (-1 when killed by a signal)
  std::string out;  // stdout and stderr together
};

// Runs `EXE ARGS` (with optional `VAR=value` environment prefix) through the shell.
inline CliResult run_executable(const std::string& exe, const std::string& args, const std::string& env) {
  std::string cmd = env + " " + exe + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Runs `attnlab ARGS` (with optional `VAR=value` environment prefix).
inline CliResult run_attnlab(const std::string& args, const std::string& env = "") {
  return run_executable(ATTNLAB_EXE, args, env);
}

// The same command line built with faults injected from `env`
// (tests/fault_injection_main.cpp says which variables it reads).
inline CliResult run_attnlab_faults(const std::string& args, const std::string& env) {
  return run_executable(ATTNLAB_FAULTS_EXE, args, env);
}

// A fresh directory under the system temp dir, removed at scope exit. Names
// must be unique across the suite: ctest runs test cases in parallel.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("attnlab-test-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& sub) const { return (path / sub).string(); }
};

// RUN/summary.json, parsed (the test fails if the run wrote none).
inline nlohmann::json read_summary(const std::string& run) {
  std::ifstream in(run + "/summary.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// The first difference between two safetensors files' tensors, or "" when
// they hold the same names and shapes in the same order and the same bits.
inline std::string checkpoint_difference(const std::string& a_path, const std::string& b_path) {
  const SafetensorsData a = load_safetensors(a_path), b = load_safetensors(b_path);
  if (a.tensors.size() != b.tensors.size())
    return std::to_string(a.tensors.size()) + " tensors against " + std::to_string(b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name, x] = a.tensors[i];
    const auto& [other_name, y] = b.tensors[i];
    if (name != other_name) return "tensor " + std::to_string(i) + ": " + name + " against " + other_name;
    if (x.shape() != y.shape()) return name + ": shape " + x.shape_str() + " against " + y.shape_str();
    if (std::memcmp(x.data(), y.data(), sizeof(*x.data()) * static_cast<size_t>(x.numel())) != 0)
      return name + ": different values";
  }
  return "";
}

// A metrics.csv without its two time columns (tokens_per_s, elapsed_s, found
// by the header), row by row: what two runs of the same bits must share.
inline std::string metrics_without_times(const std::string& csv_path) {
  std::ifstream in(csv_path);
  REQUIRE(in);
  auto cells_of = [](const std::string& line) {
    std::vector<std::string> cells(1);
    for (char c : line) {
      if (c == ',') cells.emplace_back();
      else cells.back() += c;
    }
    return cells;
  };
  std::string line, out;
  std::vector<size_t> dropped;
  size_t columns = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = cells_of(line);
    if (columns == 0) {
      columns = cells.size();
      for (size_t c = 0; c < cells.size(); ++c)
        if (cells[c] == "tokens_per_s" || cells[c] == "elapsed_s") dropped.push_back(c);
      REQUIRE(dropped.size() == 2);
    }
    REQUIRE(cells.size() == columns);
    for (size_t c = 0; c < cells.size(); ++c)
      if (c != dropped[0] && c != dropped[1]) out += cells[c] + ",";
    out += "\n";
  }
  return out;
}

// RUN/checkpoints/step-NNNNNNNN: add ".safetensors" (the model) or ".optim.safetensors".
inline std::string checkpoint_stem(const std::string& run, int step) {
  char name[64];
  std::snprintf(name, sizeof name, "/checkpoints/step-%08d", step);
  return run + name;
}

// Two runs of the same bits: model and optimizer checkpoints at `step`, and metrics.csv without its times.
inline void require_same_run(const std::string& a, const std::string& b, int step) {
  INFO(a << " against " << b << " at step " << step);
  REQUIRE(std::filesystem::exists(checkpoint_stem(a, step) + ".safetensors"));
  CHECK(checkpoint_difference(checkpoint_stem(a, step) + ".safetensors", checkpoint_stem(b, step) + ".safetensors") ==
        "");
  CHECK(checkpoint_difference(checkpoint_stem(a, step) + ".optim.safetensors",
                              checkpoint_stem(b, step) + ".optim.safetensors") == "");
  CHECK(metrics_without_times(a + "/metrics.csv") == metrics_without_times(b + "/metrics.csv"));
}

}  // namespace attnlab::testing
