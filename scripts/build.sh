#!/usr/bin/env bash
# Configures and builds attnlab (Release) into ./build (or $ATTNLAB_BUILD_DIR).
# --target NAME (first) builds only that target and what it needs; the other
# arguments go to cmake's configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ATTNLAB_BUILD_DIR:-$root/build}"
target=()
if [ "${1:-}" = --target ]; then target=(--target "$2"); shift 2; fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$(nproc)" "${target[@]}"
