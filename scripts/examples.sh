#!/usr/bin/env bash
# Builds every examples/*/ project against an *installed* attnlab, as a user would:
#   scripts/examples.sh [BUILD_DIR]     (default: build/, already built)
# installs BUILD_DIR into a temporary prefix, checks that the installed headers
# include only installed headers, then for each example configures with only
# -DCMAKE_PREFIX_PATH=<prefix>, builds and runs it (each must exit 0).
# Exits 1 if any step fails, 2 for a build directory that is not one; removes
# everything it created.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "examples.sh: not a configured build directory: $build" >&2
  exit 2
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/attnlab-examples.XXXXXX")" || exit 1
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
jobs="$(nproc)"

if ! cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  echo "examples.sh: cmake --install $build failed" >&2
  exit 1
fi

# A public header that includes a header left out of the install (cli/, tests/)
# would only fail in a user's build: catch it here.
missing=0
include_root="$prefix/include/attnlab"
while IFS= read -r line; do
  file="${line%%:*}"
  inc="$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")"
  if [[ ! -f "$include_root/$inc" ]]; then
    echo "examples.sh: ${file#"$include_root"/} includes \"$inc\", which is not installed" >&2
    missing=1
  fi
done < <(grep -rH '^#include "' "$include_root")
[[ $missing == 0 ]] || exit 1

failed=()
for dir in "$root"/examples/*/; do
  name="$(basename "$dir")"
  [[ -f "$dir/CMakeLists.txt" ]] || continue
  out="$tmp/build-$name"
  echo "== examples/$name"
  if ! cmake -S "$dir" -B "$out" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/$name.log" 2>&1 ||
     ! cmake --build "$out" -j"$jobs" >>"$tmp/$name.log" 2>&1; then
    cat "$tmp/$name.log" >&2
    echo "examples.sh: examples/$name did not configure and build" >&2
    failed+=("$name")
    continue
  fi
  # Each project builds one executable named after its directory.
  if ! (cd "$out" && timeout 600 "./$name"); then
    echo "examples.sh: examples/$name exited non-zero" >&2
    failed+=("$name")
  fi
done

if (( ${#failed[@]} )); then
  echo "examples.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "examples.sh: every example built against the installed package and passed"
