#pragma once
// Test seams: faults the tests inject into the command line. The attnlab
// executable never calls these; the fault-injection build of the CLI that the
// tests run (tests/fault_injection_main.cpp, target attnlab_faults) does,
// before run_command_line. Production code reads no environment variable for them.
#include <functional>
#include <string>

#include "training/step.h"

namespace attnlab::cli {

// Hooks that every later `train` passes to its steps (training/step.h).
void set_step_hooks_for_tests(StepHooks hooks);

// `gradcheck` multiplies the analytic gradient of this parameter by 1.1 after
// backward (a wrong backward, so a test can see the check fail); empty: off.
void set_gradcheck_break_for_tests(std::string parameter);

// eval, predict, attention and report (load_run) call this with the stem of
// the checkpoint they chose, before they open it: a test removes it there, as
// a run training meanwhile removes its older checkpoints (--keep).
void set_checkpoint_chosen_hook_for_tests(std::function<void(const std::string& stem)> hook);

}  // namespace attnlab::cli
