#include "cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace attnlab::cli {

namespace {

// Ranks of the bar's parts: the highest is left out first when the terminal
// is narrow. Where the run is and when it ends matter most; the training
// batch's accuracies and the bar graphic repeat what the other parts say.
enum Rank { kStep = 0, kEta, kLoss, kSpeed, kHeldout, kSeq, kTok, kGraphic };

constexpr int kGraphicWidth = 20;

std::string formatted(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace

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

int terminal_width(int fd) {
  struct winsize ws = {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    char* end = nullptr;
    const long n = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && n > 0 && n < 100000) return static_cast<int>(n);
  }
  return 80;
}

std::string fit_fields(const std::vector<std::pair<int, std::string>>& parts, size_t max_chars) {
  std::vector<bool> kept(parts.size(), true);
  auto joined = [&] {
    std::string line;
    for (size_t i = 0; i < parts.size(); ++i)
      if (kept[i]) line += (line.empty() ? "" : "  ") + parts[i].second;
    return line;
  };
  std::string line = joined();
  while (line.size() > max_chars) {
    size_t drop = parts.size();  // the kept part of the highest rank, never the last one left
    size_t left = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!kept[i]) continue;
      ++left;
      if (drop == parts.size() || parts[i].first > parts[drop].first) drop = i;
    }
    if (left <= 1) break;
    kept[drop] = false;
    line = joined();
  }
  if (line.size() > max_chars) line.resize(max_chars);
  return line;
}

Progress::Progress(int64_t first_step, int64_t last_step, bool quiet, int64_t plain_every)
    : first_(first_step),
      last_(last_step),
      quiet_(quiet),
      terminal_(isatty(STDOUT_FILENO) != 0),
      plain_every_(plain_every > 0 ? plain_every : 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::vector<std::pair<int, std::string>> Progress::fields(const ProgressStats& s) const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double done = static_cast<double>(s.step - first_ + 1);
  double eta = done > 0 ? elapsed / done * static_cast<double>(last_ - s.step) : -1;
  std::vector<std::pair<int, std::string>> out;
  out.emplace_back(kStep, "step " + std::to_string(s.step) + "/" + std::to_string(last_));
  out.emplace_back(kLoss, formatted("loss %.4f", s.loss));
  out.emplace_back(kTok, formatted("tok %5.1f%%", 100 * s.token_acc));
  out.emplace_back(kSeq, formatted("seq %5.1f%%", 100 * s.exact_acc));
  if (s.heldout_exact >= 0) out.emplace_back(kHeldout, formatted("held-out %5.1f%%", 100 * s.heldout_exact));
  out.emplace_back(kSpeed, formatted("%.1fk tok/s", s.tokens_per_s / 1000));
  out.emplace_back(kEta, "ETA " + format_duration(eta));
  return out;
}

std::string Progress::render(const ProgressStats& s) const { return fit_fields(fields(s), std::string::npos); }

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
  double frac = last_ > first_ - 1 ? static_cast<double>(s.step - first_ + 1) / static_cast<double>(last_ - first_ + 1) : 1;
  int filled = static_cast<int>(frac * kGraphicWidth + 0.5);
  auto parts = fields(s);
  parts.insert(parts.begin(), {kGraphic, "[" + std::string(static_cast<size_t>(filled), '#') +
                                             std::string(static_cast<size_t>(kGraphicWidth - filled), '.') + "]"});
  // One column short of the width: a line that fills the last column makes
  // some terminals wrap at once, and every redraw would then scroll.
  const int width = terminal_width(STDOUT_FILENO);
  std::cout << "\r\033[K" << fit_fields(parts, static_cast<size_t>(std::max(1, width - 1))) << std::flush;
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
