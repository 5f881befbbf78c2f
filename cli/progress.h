#pragma once
// Training progress: a live one-line bar on a terminal, plain periodic lines
// when the output is piped, nothing with --quiet.
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "training/metrics_log.h"

namespace attnlab::cli {

class Progress {
 public:
  // plain_every: in plain mode, print a line every this many steps.
  Progress(int64_t first_step, int64_t last_step, bool quiet, int64_t plain_every);
  void update(const ProgressStats& s);  // called every step
  void message(const std::string& line);  // a line that does not break the bar
  void finish();

  bool is_terminal() const { return terminal_; }

 private:
  // The line's parts in display order, each with its rank (0 = kept longest).
  std::vector<std::pair<int, std::string>> fields(const ProgressStats& s) const;
  std::string render(const ProgressStats& s) const;  // plain mode: every field but the bar

  int64_t first_, last_;
  bool quiet_, terminal_;
  int64_t plain_every_;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

std::string format_duration(double seconds);  // "1:05", "1:02:03"

// The columns of the terminal on `fd`: its window size (TIOCGWINSZ), else a
// positive COLUMNS, else 80.
int terminal_width(int fd);

// Joins the parts of a status line (each but the first prefixed by two
// spaces) in their order, leaving out the highest-ranked ones first until the
// line has at most `max_chars` characters; a line still too long is cut.
// `parts`: (rank, text) with rank 0 the most important.
std::string fit_fields(const std::vector<std::pair<int, std::string>>& parts, size_t max_chars);

}  // namespace attnlab::cli
