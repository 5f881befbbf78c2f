#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, trains the
# default task (reverse) on one thread, shows held-out examples with the
# model's answers and names the run's HTML report.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Only what the demo needs: the packages that build the executable, and the
# executable alone (scripts/test.sh installs and builds the rest).
"$root/scripts/install-deps.sh" --demo
"$root/scripts/build.sh" --target attnlab -DATTNLAB_BUILD_TESTS=OFF
attnlab="${ATTNLAB_BUILD_DIR:-$root/build}/attnlab"
run="${1:-$root/runs/demo}"
echo
echo "== attnlab train --run $run --threads 1   (the default task: reverse)"
# --overwrite replaces an earlier demo run, and only an attnlab run: any other
# directory given as "$1" is refused, never deleted.
"$attnlab" train --run "$run" --threads 1 --overwrite --report
echo
echo "== attnlab eval --run $run"
"$attnlab" eval --run "$run" --examples 5
echo
echo "The run's report (curves, gradient flow, attention, answers; opens offline in a browser):"
echo "  $run/report.html"
