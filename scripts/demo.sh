#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, trains the
# default task (reverse) on one thread and shows held-out examples with the
# model's answers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" -DATTNLAB_BUILD_TESTS=OFF
attnlab="${ATTNLAB_BUILD_DIR:-$root/build}/attnlab"
run="${1:-$root/runs/demo}"
rm -rf "$run"
echo
echo "== attnlab train --run $run --threads 1   (the default task: reverse)"
"$attnlab" train --run "$run" --threads 1
echo
echo "== attnlab eval --run $run"
"$attnlab" eval --run "$run" --examples 5
