#!/usr/bin/python3
"""Every Catch2 test case is a ctest test (a ctest test of its own).

catch_discover_tests writes one add_test per name that `--list-test-names-only`
prints; a name with an unbalanced '[' or ']' (or a ';' or '"') ends that script
early, and every test after it silently leaves the suite while ctest still
reports 100%. This compares the two lists for each Catch2 binary and names what
is missing. A name that begins with '-' is registered but cannot run (the
binary takes it for an option): named too.

usage: check_test_registration.py BUILD_DIR PREFIX=EXECUTABLE...
"""
import json
import subprocess
import sys


def catch_names(exe):
    # (Catch2 2.x exits with the number of names listed, not 0.)
    out = subprocess.run([exe, "--list-test-names-only"], capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def main():
    build, pairs = sys.argv[1], sys.argv[2:]
    listed = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True, check=True)
    registered = {t["name"] for t in json.loads(listed.stdout)["tests"]}
    failed = False
    for pair in pairs:
        prefix, exe = pair.split("=", 1)
        names = catch_names(exe)
        missing = sorted(n for n in names if prefix + n not in registered)
        print(f"{exe}: {len(names)} test cases, {len(names) - len(missing)} registered with ctest")
        for name in missing:
            print(f"  not registered: {name!r}")
        options = sorted(n for n in names if n.startswith("-"))
        for name in options:
            print(f"  begins with '-', which the binary reads as an option: {name!r}")
        failed |= bool(missing) or bool(options) or not names
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
