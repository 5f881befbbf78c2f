// The directory of a tool (scripts/tools/sweep.py, scripts/tools/tune.py), claimed by one
// rule (training/run_dir/tool_dir.h): new or empty directories are taken and
// marked, the tool's own accepted, everything else refused and left as it was.
#include <catch2/catch.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_harness.h"
#include "framework/error.h"
#include "training/run_dir/tool_dir.h"

using namespace attnlab;
using attnlab::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string refusal(const std::string& dir, ToolKind kind) {
  try {
    claim_tool_directory(dir, kind);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("a tool's directory: a new one (with its parents) and an empty one are marked, the tool's own is accepted, "
          "the other tool's and a run are refused",
          "[run-dir][tool-dir]") {
  TempDir dir("tool-dir");
  const std::string sweep = dir / "a/b/sweep";
  claim_tool_directory(sweep, ToolKind::kSweep);
  CHECK(entries(sweep) == std::vector<std::string>{".attnlab-sweep"});
  CHECK(has_tool_marker(sweep, ToolKind::kSweep));
  CHECK_FALSE(has_tool_marker(sweep, ToolKind::kStudy));
  std::ofstream(sweep + "/summary.csv") << "run\n";
  CHECK(refusal(sweep, ToolKind::kSweep).empty());  // an interrupted sweep continues
  CHECK(refusal(sweep, ToolKind::kStudy) ==
        "--out refuses to write into '" + sweep +
            "': it is scripts/tools/sweep.py's sweep directory (.attnlab-sweep), not a tuning study directory");
  fs::create_directories(dir / "empty");
  claim_tool_directory(dir / "empty", ToolKind::kStudy);
  CHECK(entries(dir / "empty") == std::vector<std::string>{".attnlab-study"});
  fs::create_directories(dir / "run");
  std::ofstream(dir / "run/.attnlab-run") << "attnlab run directory, format 1\n";
  CHECK(refusal(dir / "run", ToolKind::kSweep) ==
        "--out refuses to write into '" + (dir / "run") + "': it is an attnlab run directory (.attnlab-run)");
  CHECK(entries(dir / "run") == std::vector<std::string>{".attnlab-run"});
  CHECK(refusal("", ToolKind::kSweep) == "--out needs a path, got an empty one");
  CHECK_THROWS_WITH(parse_choice<ToolKind>("--kind", "run", Naming::flag), "--kind must be one of study, sweep, got 'run'");
  CHECK(parse_choice<ToolKind>("--kind", "study") == ToolKind::kStudy);
  CHECK(tool_marker_name(ToolKind::kSweep) == ".attnlab-sweep");
}

TEST_CASE("a tool's directory: a user's files, a file, a symlink as the directory, as its marker or inside it are "
          "refused, nothing written, a marker with other content is none, a killed claim's temporary no obstacle",
          "[run-dir][tool-dir]") {
  TempDir dir("tool-dir-refused");
  fs::create_directories(dir / "mine");
  std::ofstream(dir / "mine/notes.txt") << "mine\n";
  CHECK(refusal(dir / "mine", ToolKind::kSweep) ==
        "--out refuses to write into '" + (dir / "mine") +
            "': it holds files and is not a sweep directory (no .attnlab-sweep marker); choose a new or empty directory");
  CHECK(entries(dir / "mine") == std::vector<std::string>{"notes.txt"});
  std::ofstream(dir / "afile") << "mine\n";
  CHECK(refusal(dir / "afile", ToolKind::kStudy) == "--out refuses to write into '" + (dir / "afile") + "': it is not a directory");
  CHECK(refusal(dir / "afile/sub", ToolKind::kStudy).find("cannot create") == 0);
  fs::create_directories(dir / "target");
  fs::create_directory_symlink(dir / "target", dir / "link");
  CHECK(refusal(dir / "link/", ToolKind::kSweep).find("it is a symbolic link") != std::string::npos);
  CHECK(fs::is_empty(dir / "target"));
  claim_tool_directory(dir / "sweep", ToolKind::kSweep);
  fs::create_symlink(dir / "afile", dir / "sweep/summary.csv");
  CHECK(refusal(dir / "sweep", ToolKind::kSweep) == "--out refuses to write into '" + (dir / "sweep") +
                                                         "': its summary.csv is a symbolic link (the tool does not write "
                                                         "through one)");
  fs::create_directories(dir / "linked-marker");
  fs::create_symlink(dir / "sweep/.attnlab-sweep", dir / "linked-marker/.attnlab-sweep");
  CHECK(refusal(dir / "linked-marker", ToolKind::kSweep).find("its .attnlab-sweep is not the marker attnlab writes") !=
        std::string::npos);
  fs::create_directories(dir / "other-content");
  std::ofstream(dir / "other-content/.attnlab-study") << "attnlab tuning study directory, format 2\n";
  CHECK_FALSE(has_tool_marker(dir / "other-content", ToolKind::kStudy));
  CHECK(refusal(dir / "other-content", ToolKind::kStudy).find("is not the marker attnlab writes") != std::string::npos);
  fs::create_directories(dir / "stale");
  std::ofstream(dir / "stale/..attnlab-study.tmp.Ab12Cd") << "attnlab tun";
  claim_tool_directory(dir / "stale", ToolKind::kStudy);
  CHECK(entries(dir / "stale") == std::vector<std::string>{".attnlab-study"});
}

TEST_CASE("a tool's directory: workers claiming one new directory at the same moment all get it, one marker",
          "[run-dir][tool-dir]") {
  TempDir dir("tool-dir-race");
  for (int round = 0; round < 20; ++round) {
    const std::string study = dir / ("study" + std::to_string(round));
    std::vector<std::string> refusals(8);
    std::vector<std::thread> workers;
    for (size_t w = 0; w < refusals.size(); ++w)
      workers.emplace_back([&, w] { refusals[w] = refusal(study, ToolKind::kStudy); });
    for (auto& t : workers) t.join();
    for (const std::string& r : refusals) CHECK(r.empty());
    CHECK(entries(study) == std::vector<std::string>{".attnlab-study"});
  }
}

TEST_CASE("a tool's directory: the root and $HOME are refused as such, and a disk that will not take the marker "
          "leaves no directory the claim made",
          "[run-dir][tool-dir]") {
  TempDir dir("tool-dir-protected");
  CHECK(refusal("/", ToolKind::kSweep) == "--out refuses to write into '/': it is the root directory");
  const char* home = std::getenv("HOME");
  const std::string saved = home ? home : "";
  fs::create_directories(dir / "home");
  ::setenv("HOME", (dir / "home").c_str(), 1);
  const std::string why = refusal(dir / "home", ToolKind::kStudy);
  if (home) ::setenv("HOME", saved.c_str(), 1); else ::unsetenv("HOME");
  CHECK(why == "--out refuses to write into '" + (dir / "home") + "': it is the home directory ($HOME)");
  CHECK(fs::is_empty(dir / "home"));
  // RLIMIT_FSIZE 0 makes the marker's write fail with EFBIG, even for root, once SIGXFSZ is ignored.
  fs::create_directories(dir / "empty");
  rlimit old_limit;
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit none = old_limit;
  none.rlim_cur = 0;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &none) == 0);
  const std::string in_new = refusal(dir / "a/b/new", ToolKind::kSweep), in_empty = refusal(dir / "empty", ToolKind::kSweep);
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  CHECK(in_new.find(".attnlab-sweep") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "a"));
  CHECK(in_empty.find(".attnlab-sweep") != std::string::npos);
  CHECK(fs::is_empty(dir / "empty"));
}
