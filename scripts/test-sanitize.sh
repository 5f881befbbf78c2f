#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer:
# builds into ./build-asan (-DATTNLAB_SANITIZE=ON) and runs ctest there. Any
# report fails the run: UBSan findings abort (-fno-sanitize-recover), ASan
# halts on its first error, and the CLI tests run the sanitized executable,
# so a report in a child process fails the test that started it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ATTNLAB_ASAN_BUILD_DIR:-$root/build-asan}"
# Portable code generation (ATTNLAB_NATIVE=OFF), for two reasons:
# - the sanitizer run is then the same code on every CPU kind, so a pass here
#   means a pass on any CI machine (the Release suite of scripts/test.sh still
#   tests the -march=native code);
# - GCC 12 with AVX-512 miscompiles use-after-return frames: a 512-bit vector
#   value (even one only ever in a register) raises the frame's slot alignment
#   to 64, so GCC takes the ASan-protected objects at 64-byte multiples of the
#   realigned frame to be 64-byte aligned and copies them with vmovdqa64; but
#   it places the fake frame from __asan_stack_malloc_N only for the protected
#   objects' own alignment (32 here), so with detect_stack_use_after_return=1
#   those moves fault (#GP, reported as a SEGV on a bogus address). Without
#   AVX no slot is aligned beyond what the protected objects ask for (an
#   alignas(64) local is itself protected, and the fake frame honours it).
# ATTNLAB_DOCS_TEST=OFF: the docs' command blocks train several models, which under
# ASan take tens of minutes; they check the docs against the program, and the
# Release suite of scripts/test.sh runs them. Every CLI test still runs here.
# ATTNLAB_SCALE_TEST=OFF: the report test on an L-sized run trains for minutes to print a page's
# size and load time, figures that mean nothing under ASan; the other browser test runs the same
# report code here.
# ATTNLAB_BROWSER_DETAIL_TESTS=OFF: the browser tests of each part of the report check the page's
# script, which sanitizers do not change; the C++ that writes the page's data (interventions included)
# runs here in report_pages_render_offline_in_chromium_with_the_csvs_numbers and the CLI tests.
# ATTNLAB_SCRIPT_TESTS=OFF: the tests of the Python tools (scripts/pytorch/attnlab_torch.py, tune.py,
# torch_gpt_reference.py, the study scripts) check Python code against the program's output;
# the C++ they drive (train, predict, checkpoints) runs here in the unit tests, and the Release
# suite runs them.
# ATTNLAB_MPI=OFF: Open MPI's own libraries keep allocations to exit, which LeakSanitizer
# reports from every rank; this build tests the one-process stand-in, and the Release suite
# runs the real mpirun jobs (tests/test_mpi.cpp).
# ATTNLAB_UNITY=OFF: this build compiles every file on its own, so a file that compiles only
# beside another one's includes in a unity batch (the Release build's) is found here.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNLAB_SANITIZE=ON -DATTNLAB_NATIVE=OFF -DATTNLAB_DOCS_TEST=OFF \
  -DATTNLAB_SCALE_TEST=OFF -DATTNLAB_BROWSER_DETAIL_TESTS=OFF -DATTNLAB_SCRIPT_TESTS=OFF -DATTNLAB_MPI=OFF -DATTNLAB_UNITY=OFF -DATTNLAB_BUILD_TESTS=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
# allocator_may_return_null: a huge allocation throws std::bad_alloc, as without ASan.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --output-on-failure -j"$(nproc)"
