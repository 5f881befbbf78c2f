#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every test.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" -DATTNLAB_BUILD_TESTS=ON
cd "${ATTNLAB_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j"$(nproc)"
