#pragma once
// The clocks the benchmarks share: wall time of a timed region, and the
// process's peak resident memory.
#include <sys/resource.h>

#include <chrono>

namespace attnlab::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The most memory the process has held so far, in MiB.
inline double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace attnlab::bench
