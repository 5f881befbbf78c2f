#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer:
# builds into ./build-asan (-DATTNLAB_SANITIZE=ON) and runs ctest there. Any
# report fails the run: UBSan findings abort (-fno-sanitize-recover), ASan
# halts on its first error, and the CLI tests run the sanitized executable,
# so a report in a child process fails the test that started it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ATTNLAB_ASAN_BUILD_DIR:-$root/build-asan}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNLAB_SANITIZE=ON -DATTNLAB_NATIVE=ON \
  -DATTNLAB_BUILD_TESTS=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
# allocator_may_return_null: a huge allocation throws std::bad_alloc, as without ASan.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --output-on-failure -j"$(nproc)"
