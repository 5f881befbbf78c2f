#pragma once
// attnlab as a real background process, for tests of signals, locks, kills and
// full disks: start it, wait for a moment in its run, wait for its exit.
// Every wait has a timeout that kills the child and fails the test: a guard
// against a hang, never a timing assertion.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace attnlab::testing {

// Splits on spaces; "double quotes" keep a word with spaces together (an input such as "1 2 3").
inline std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  bool quoted = false, any = false;
  for (char c : text) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (c == ' ' && !quoted) {
      if (any) out.push_back(word);
      word.clear();
      any = false;
    } else {
      word += c;
      any = true;
    }
  }
  if (any) out.push_back(word);
  return out;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Starts the program argv_text[0] (a path, no shell) with stdout and stderr
// into `log`; a positive `max_file_bytes` sets RLIMIT_FSIZE (a full disk, as
// far as the child can tell; the log is limited too). spawn: `attnlab ARGS`
// (split on spaces).
inline pid_t spawn_program(std::vector<std::string> argv_text, const std::string& log, rlim_t max_file_bytes = 0) {
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // only async-signal-safe calls until exec
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) ::_exit(126);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    if (max_file_bytes > 0) {
      rlimit limit{max_file_bytes, max_file_bytes};
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

inline pid_t spawn(const std::string& args, const std::string& log, rlim_t max_file_bytes = 0) {
  std::vector<std::string> argv_text = words(args);
  argv_text.insert(argv_text.begin(), ATTNLAB_EXE);
  return spawn_program(argv_text, log, max_file_bytes);
}

// The exit code, or 128 + signal for a killed child.
inline int wait_exit(pid_t pid, double timeout_s = 300) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    REQUIRE(r >= 0);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("attnlab did not exit within " << timeout_s << " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Polls `ready` every 2 ms; fails when the child exits first.
inline void wait_until(pid_t pid, const std::function<bool()>& ready, double timeout_s = 300) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!ready()) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) FAIL("attnlab exited before the awaited moment");
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("timed out waiting for the run to get there");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// A spawned attnlab that is killed (SIGKILL) when the object goes, so a
// failing test never leaves a training behind.
struct Child {
  pid_t pid = -1;
  Child(const std::string& args, const std::string& log, rlim_t max_file_bytes = 0)
      : pid(spawn(args, log, max_file_bytes)) {}
  explicit Child(pid_t spawned) : pid(spawned) {}  // from spawn_program
  ~Child() {
    if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int wait(double timeout_s = 120) {
    const pid_t p = pid;
    pid = -1;  // reaped (or killed and reaped) by wait_exit, whatever it returns
    return wait_exit(p, timeout_s);
  }
  void wait_until(const std::function<bool()>& ready, double timeout_s = 120) {
    attnlab::testing::wait_until(pid, ready, timeout_s);
  }
  int kill9() {
    REQUIRE(::kill(pid, SIGKILL) == 0);
    return wait();
  }
};

}  // namespace attnlab::testing
