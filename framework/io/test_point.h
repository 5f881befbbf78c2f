#pragma once
// A seam for the tests of interrupts: the instants where a signal is hardest
// to answer (a file written but not yet renamed into place, a run directory
// made but not yet locked or marked, a training step or a held-out batch
// done) call test_point(). It does nothing unless a test build installed a
// hook (cli/test_seams.h, tests/fault_injection_main.cpp); the attnlab
// executable never does, so production pays one branch per call.
#include <functional>

namespace attnlab {

void test_point();
void set_test_point_hook(std::function<void()> hook);

}  // namespace attnlab
