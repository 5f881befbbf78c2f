#!/usr/bin/python3
"""docs/errors.md's refusals, run: every self-contained table row of the form
| `attnlab ARGS` | CODE | `MESSAGE` |
must exit with CODE and print exactly one line, MESSAGE, with numbers masked
(memory sizes and such depend on the machine). A row that needs a run made by
hand (runs/..., afile, stub, nowhere) or that names a directory to replace
(--overwrite, /, $HOME) is left to the C++ tests, which build those runs. Each
command runs in an empty scratch directory and may not leave anything there.
(A ctest test; needs no torch.)

usage: test_error_table.py --attnlab BUILD/attnlab
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW = re.compile(r"^\| `(attnlab [^`]*)` \| (\d+) \| `([^`]*)` \|$")
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
NEEDS_SETUP = ("runs/", "…", "$HOME", "--overwrite", "afile", "stub", "nowhere", "x.ini", "--run ")


def rows(path):
    with open(path) as f:
        for n, line in enumerate(f, 1):
            m = ROW.match(line.strip())
            if m and not any(word in m.group(1) for word in NEEDS_SETUP):
                yield n, m.group(1), int(m.group(2)), m.group(3)


def masked(text):
    return NUMBER.sub("N", text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", required=True)
    p.add_argument("--page", default=os.path.join(ROOT, "docs", "errors.md"))
    args = p.parse_args()
    exe = os.path.abspath(args.attnlab)
    failures, checked = [], 0
    for n, command, code, message in rows(args.page):
        with tempfile.TemporaryDirectory(prefix="attnlab-errors-") as work:
            argv = [exe] + shlex.split(command)[1:]
            try:
                r = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                failures.append(f"line {n}: `{command}` ran for more than 120 s")
                continue
            out = (r.stdout + r.stderr).rstrip("\n")
            checked += 1
            if r.returncode != code or "\n" in out or masked(out) != masked(message):
                failures.append(f"line {n}: `{command}`: exit {r.returncode}, printed {out!r}; the page says exit "
                                f"{code} and {message!r}")
            elif os.listdir(work):
                failures.append(f"line {n}: `{command}` left {sorted(os.listdir(work))} behind")
    for f in failures:
        print(f)
    print(f"{checked} rows of {os.path.relpath(args.page, ROOT)} run, {len(failures)} not as documented")
    sys.exit(1 if failures or checked == 0 else 0)


if __name__ == "__main__":
    main()
