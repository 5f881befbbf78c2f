// The pieces of owning a run directory (training/run_dir/), without the CLI:
// what the lock says about a holder that is not attnlab, and which files
// remove_run_files (--overwrite) leaves in the run's attention directory.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "framework/error.h"
#include "tests/cli_harness.h"
#include "training/run_dir/layout.h"
#include "training/run_dir/lock.h"

namespace fs = std::filesystem;
using attnlab::IoError;
using attnlab::RunDir;
using attnlab::RunLock;
using attnlab::testing::TempDir;

namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string refusal_of_lock(const std::string& dir) {
  try {
    RunLock lock = RunLock::acquire(dir);
  } catch (const IoError& e) {
    return e.what();
  }
  return "(locked)";
}

// A flock on DIR/.lock held the way another program (flock(1), a backup tool) holds it.
struct ForeignLock {
  int fd;
  explicit ForeignLock(const std::string& dir) : fd(::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT, 0644)) {
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  }
  ~ForeignLock() { ::close(fd); }
  void write_line(const std::string& line) const {
    REQUIRE(::ftruncate(fd, 0) == 0);
    REQUIRE(::pwrite(fd, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size()));
  }
};

}  // namespace

TEST_CASE("a run directory locked by a program that is not attnlab, or whose pid is stale, is refused without naming "
          "an attnlab process, and a live pid line names it",
          "[run-dir][lock]") {
  TempDir dir("run-dir-lock");
  const std::string run = dir.path.string();
  const ForeignLock foreign(run);
  const std::string unknown = "run directory '" + run + "' is in use: a process of unknown pid, perhaps not attnlab, holds " +
                              run + "/.lock; wait for it to end or stop it, or choose another --run";
  CHECK(refusal_of_lock(run) == unknown);  // nothing written into the file
  foreign.write_line("some other program's notes\n");
  CHECK(refusal_of_lock(run) == unknown);
  foreign.write_line("pid 2147483646\n");  // a killed attnlab's line, its process long gone
  CHECK(refusal_of_lock(run) == unknown);
  foreign.write_line("pid " + std::to_string(::getpid()) + "\n");
  CHECK(refusal_of_lock(run) == "run directory '" + run + "' is in use by attnlab process " + std::to_string(::getpid()) +
                                   " (it holds " + run + "/.lock); wait for it to end or stop it, or choose another --run");
  try {
    RunLock::refuse_if_held(run);
    FAIL("refuse_if_held let a held directory through");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find("is in use by attnlab process " + std::to_string(::getpid())) != std::string::npos);
  }
}

TEST_CASE("remove_run_files (train --overwrite) keeps RUN/attention and its marker while a user's file is in it, and removes both "
          "with the last of attnlab's maps",
          "[run-dir][attention]") {
  TempDir dir("run-dir-attention");
  const RunDir run(dir.path.string());
  const std::string maps = run.path() + "/attention";
  const auto attention_output = [&] {
    fs::create_directories(maps);
    write_text(maps + "/" + attnlab::kAttentionMarker, "attnlab attention output, format 1\n");
    write_text(maps + "/attention.json", R"({"layers": [{"files": ["blocks.0.attn_h0.csv", "blocks.0.attn_h1.csv"]}]})");
    write_text(maps + "/blocks.0.attn_h0.csv", "1\n");
    write_text(maps + "/blocks.0.attn_h1.csv", "1\n");
    write_text(run.config_path(), "task = reverse\n");
  };
  attention_output();
  write_text(maps + "/notes.txt", "my reading of head 1\n");
  attnlab::remove_run_files(run);
  CHECK(fs::exists(maps + "/notes.txt"));
  CHECK(attnlab::has_attention_marker(maps));  // the directory stays attnlab's: a later attention writes into it
  CHECK_FALSE(fs::exists(maps + "/attention.json"));
  CHECK_FALSE(fs::exists(maps + "/blocks.0.attn_h0.csv"));
  CHECK_FALSE(fs::exists(run.config_path()));

  fs::remove(maps + "/notes.txt");
  attention_output();
  attnlab::remove_run_files(run);
  CHECK_FALSE(fs::exists(maps));

  attention_output();  // a file the user named like a map, but not listed in attention.json, is the user's
  write_text(maps + "/blocks.0.attn_h7.csv", "mine\n");
  attnlab::remove_run_files(run);
  CHECK(fs::exists(maps + "/blocks.0.attn_h7.csv"));
  CHECK(attnlab::has_attention_marker(maps));
}
