#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

namespace attnlab::cli {

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

Progress::Progress(int64_t first_step, int64_t last_step, bool quiet, int64_t plain_every)
    : first_(first_step),
      last_(last_step),
      quiet_(quiet),
      terminal_(isatty(STDOUT_FILENO) != 0),
      plain_every_(plain_every > 0 ? plain_every : 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::string Progress::render(const ProgressStats& s) const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double done = static_cast<double>(s.step - first_ + 1);
  double eta = done > 0 ? elapsed / done * static_cast<double>(last_ - s.step) : -1;
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f  tok %5.1f%%  seq %5.1f%%", static_cast<long long>(s.step),
                static_cast<long long>(last_), s.loss, 100 * s.token_acc, 100 * s.exact_acc);
  std::string line = buf;
  if (s.heldout_exact >= 0) {
    std::snprintf(buf, sizeof buf, "  held-out %5.1f%%", 100 * s.heldout_exact);
    line += buf;
  }
  std::snprintf(buf, sizeof buf, "  %.1fk tok/s  ETA %s", s.tokens_per_s / 1000, format_duration(eta).c_str());
  return line + buf;
}

void Progress::update(const ProgressStats& s) {
  if (quiet_) return;
  if (!terminal_) {
    if (s.step % plain_every_ == 0 || s.step == last_) std::cout << render(s) << std::endl;
    return;
  }
  auto now = std::chrono::steady_clock::now();
  // Redraw at most ~10 times a second: drawing costs more than a small step.
  if (s.step != last_ && bar_shown_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const int width = 20;
  double frac = last_ > first_ - 1 ? static_cast<double>(s.step - first_ + 1) / static_cast<double>(last_ - first_ + 1) : 1;
  int filled = static_cast<int>(frac * width + 0.5);
  std::string bar = "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.') + "] ";
  std::cout << "\r\033[K" << bar << render(s) << std::flush;
  bar_shown_ = true;
}

void Progress::message(const std::string& line) {
  if (quiet_) return;
  if (terminal_ && bar_shown_) std::cout << "\r\033[K";
  std::cout << line << std::endl;
  bar_shown_ = false;
}

void Progress::finish() {
  if (!quiet_ && terminal_ && bar_shown_) std::cout << std::endl;
  bar_shown_ = false;
}

}  // namespace attnlab::cli
