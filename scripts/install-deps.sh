#!/usr/bin/env bash
# Installs the Debian packages attnlab needs, only those that are missing.
# --demo: only those scripts/demo.sh needs (build the attnlab executable, run it).
# Build and tests: a C++17 compiler, CMake, Eigen, Boost.Program_options,
# Catch2 (2.13), nlohmann-json; chromium (headless) for the report's browser
# test. Scripts (plots, PyTorch reference): python3
# with torch, numpy and matplotlib (from Debian, used as /usr/bin/python3); Optuna for
# scripts/tools/tune.py, with scikit-learn for its parameter importances; flake8 for the
# Python's lint test.
set -euo pipefail

# The demo needs only what builds and runs the attnlab executable; the tests
# need everything below.
case "${1:-}" in
  ""|--demo) ;;
  *) echo "install-deps: unknown argument '$1' (the only one is --demo)" >&2; exit 2 ;;
esac
# libdnnl-dev: oneDNN, whose sgemm is the default backend of the engine's matrix products
# (measured the fastest here, docs/performance.md); without it the build uses Eigen's.
packages=(g++ cmake make libeigen3-dev libboost-program-options-dev nlohmann-json3-dev libdnnl-dev)
if [ "${1:-}" != --demo ]; then
  packages+=(catch2 python3 python3-numpy python3-matplotlib protobuf-compiler python3-protobuf
             libopenmpi-dev openmpi-bin chromium python3-optuna python3-sklearn flake8)
  # PyTorch is large and only the reference scripts use it: skip it with ATTNLAB_NO_TORCH=1.
  # libopenblas0-pthread: without it Debian's torch falls back to the reference BLAS (~2 GFLOP/s),
  # which would make the PyTorch side of scripts/pytorch/bench_vs_torch.sh a straw man.
  if [ "${ATTNLAB_NO_TORCH:-0}" != 1 ]; then packages+=(python3-torch libopenblas0-pthread); fi
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "install-deps: these Debian packages are missing and I can neither run apt-get as root nor use sudo: ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
