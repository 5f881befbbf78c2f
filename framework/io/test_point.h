#pragma once
// A seam for the tests of interrupts: the instants where a signal is hardest
// to answer (a file written but not yet renamed into place, a run directory
// made but not yet locked or marked, a training step or a held-out batch
// done) call test_point(). It does nothing unless a test build installed a
// hook (tests/fault_injection_main.cpp); the attnlab executable never does,
// so production pays one branch per call.
#include <functional>

namespace attnlab {

inline std::function<void()>& test_point_hook() {
  static std::function<void()> hook;
  return hook;
}

inline void test_point() {
  if (test_point_hook()) test_point_hook()();
}

}  // namespace attnlab
