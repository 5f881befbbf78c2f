#!/usr/bin/env python3
"""Runs the command blocks of README.md and docs/*.md and compares their output.

A command block is a fenced block in ```sh / ```bash (a script: it must exit 0),
a fenced block whose first line starts with "$ " (a transcript: commands,
each followed by the output it printed), or a ```python block (run with
/usr/bin/python3 after the page's earlier python blocks, as one program: it
must exit 0). The blocks of one page run in order,
in a scratch directory of their own where build/ is the attnlab under test (and
on PATH as `attnlab`) and the repository's other top-level folders (scripts/,
data/, ...) are linked, so a page's runs/ never lands in the repository.

A comment on the line before a block steers it:
  <!-- docs-check: skip REASON -->   not run (said in the report, with the reason)
  <!-- docs-check: slow -->          run only with --all (minutes of CPU)
  <!-- docs-check: exit N -->        every command of the block exits N, not 0
  <!-- docs-check: needs MODULE -->  a python block, skipped when MODULE (torch) is not installed

Comparison (the default, what the test suite runs): every command exits as
expected, and its output has the lines the page shows, compared by format:
numbers are masked, whether an answer was right and whether a target was
reached, the CPU's name, vendor and ISA flags and the products' kernel, are masked too (they may
differ between CPU kinds: a run is bitwise
reproducible only on the same binary, thread count and CPU kind), and the set
of distinct lines must be the same ("..." in the page allows more lines).
--exact compares the numbers too (only timings are masked): for the machine
the page was written on. --update rewrites each transcript with the output of
this run (not blocks with "..."), to refresh a page after a change.

Exit 0 when every block that ran matched, 1 otherwise; a summary line at the end.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from attnlab_runs.launch import ROOT

FENCE = re.compile(r"^```(\w*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*docs-check:\s*(\w+)\s*(.*?)\s*-->$")
NUMBER = re.compile(r"[-+]?\d+(?:[.:]\d+)*(?:e[-+]?\d+)?[kM]?")
TIMINGS = [  # masked in --exact mode: they depend on the machine's load
    re.compile(r"[\d.]+k? tok/s"), re.compile(r"ETA [\d:]+"), re.compile(r"\([\d.]+ s\)"),
    re.compile(r'"(step_ms|tokens_per_s|gflops|seconds|peak_rss_mib|mfu|peak_gflops)":[\d.e+-]+'),
]
OUTCOME = [  # masked in format mode: they may differ between CPU kinds
    (re.compile(r"\((correct|expected [^)]*)\)"), "(OUTCOME)"),
    (re.compile(r"; target [\d.]+% reached at step \d+"), ""),
    # summary.json names the CPU the run trained on; bench the CPU, its ISA flags and the products' kernel
    (re.compile(r'("cpu(?:_vendor)?": ?)"[^"]*"'), r"\1CPU"),
    (re.compile(r'("cpu_isa": ?)\[[^\]]*\]'), r"\1ISA"),
    (re.compile(r'("gemm_(?:backend|kernel)": ?)"[^"]*"'), r"\1KERNEL"),
]


class Block:
    def __init__(self, path, line, lang, lines, directive):
        self.path, self.line, self.lang, self.lines = path, line, lang, lines
        self.kind, self.arg = directive

    @property
    def is_script(self):
        return self.lang in ("sh", "bash")

    @property
    def is_python(self):
        return self.lang == "python"

    @property
    def is_transcript(self):
        return not self.lang and bool(self.lines) and self.lines[0].startswith("$ ")

    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"


def read_blocks(path):
    blocks, lines = [], open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        d = DIRECTIVE.match(prev)
        directive = (d.group(1), d.group(2)) if d else ("", "")
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        blocks.append(Block(path, i + 1, m.group(1), lines[i + 1:end], directive))
        i = end + 1
    return blocks


def split_transcript(lines):
    """[(command, its lines as written, [expected output lines])]: '$ ' starts a command, a trailing '\\'
    continues it."""
    steps, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        cmd, written = lines[i][2:], [lines[i]]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
            written.append(lines[i])
        i += 1
        out = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        while out and not out[-1].strip():
            out.pop()
        steps.append((cmd, written, out))
    return steps


def scratch_dir(attnlab):
    work = tempfile.mkdtemp(prefix="attnlab-docs-")
    for name in os.listdir(ROOT):
        if name.startswith(".") or name.startswith("build") or name == "runs":
            continue
        os.symlink(os.path.join(ROOT, name), os.path.join(work, name))
    os.symlink(os.path.dirname(attnlab), os.path.join(work, "build"))
    return work


def run(cmd, work, env):
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd + " 2>&1"], cwd=work, env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, errors="replace")
    return p.returncode, p.stdout.rstrip("\n").split("\n") if p.stdout.strip() else []


def normalise(line, exact):
    line = " ".join(line.split())
    for pattern in TIMINGS:
        line = pattern.sub("T", line)
    if not exact:
        for pattern, repl in OUTCOME:
            line = pattern.sub(repl, line)
        line = NUMBER.sub("N", line)
    return line


def compare(expected, actual, exact):
    """'' when they match, else what differs."""
    elided = any(line.strip() == "..." for line in expected)
    want = {normalise(x, exact) for x in expected if x.strip() and x.strip() != "..."}
    got = {normalise(x, exact) for x in actual if x.strip()}
    missing = sorted(want - got)
    extra = [] if elided else sorted(got - want)
    if not missing and not extra:
        return ""
    return "".join(f"\n      missing: {m}" for m in missing[:5]) + "".join(f"\n      not shown: {e}" for e in extra[:5])


def check_block(block, work, env, args, report):
    """Returns the block's new lines (for --update), or None."""
    expected_exit = int(block.arg) if block.kind == "exit" else 0
    if block.is_python:
        with open(os.path.join(work, ".docs_block.py"), "w", encoding="utf-8") as f:
            f.write("\n".join(block.lines) + "\n")
        code, out = run("/usr/bin/python3 .docs_block.py", work, env)
        report(code == 0, block, f"python exited {code}:\n      " + "\n      ".join(out[-5:]))
        return None
    if block.is_script:
        code, out = run("set -e\n" + "\n".join(block.lines), work, env)
        ok = code == expected_exit
        tail = "" if ok else "\n      " + "\n      ".join(out[-5:])
        report(ok, block, f"script exited {code}, expected {expected_exit}" + tail)
        return None
    new_lines, problems = [], []
    for cmd, written, expected in split_transcript(block.lines):
        code, out = run(cmd, work, env)
        if code != expected_exit:
            problems.append(f"'{cmd}' exited {code}, expected {expected_exit}: " + " | ".join(out[-3:]))
        diff = compare(expected, out, args.exact)
        if diff:
            problems.append(f"'{cmd}' output differs:{diff}")
        new_lines += written + out + [""]
    report(not problems, block, "; ".join(problems))
    if any(line.strip() == "..." for line in block.lines):
        return None
    return new_lines[:-1]


def check_page(path, args, env, counts):
    blocks = [b for b in read_blocks(path) if b.is_script or b.is_transcript or b.is_python]
    earlier_python = []
    for b in blocks:  # a python block continues the page's earlier ones
        if b.is_python:
            earlier_python += b.lines
            b.lines = list(earlier_python)
    if not blocks:
        return
    work = scratch_dir(args.attnlab)
    updates = {}

    def report(ok, block, detail):
        counts["passed" if ok else "failed"] += 1
        print(f"{'ok  ' if ok else 'FAIL'} {block.where()}" + ("" if ok else f": {detail}"), flush=True)

    try:
        for block in blocks:
            missing = block.kind == "needs" and not module_installed(block.arg)
            if block.kind == "skip" or (block.kind == "slow" and not args.all) or missing:
                counts["skipped"] += 1
                reason = {"skip": block.arg, "slow": "slow (run with --all)"}.get(block.kind, f"{block.arg} is not installed")
                print(f"skip {block.where()}: {reason}", flush=True)
                continue
            new = check_block(block, work, env, args, report)
            if args.update and new is not None and block.is_transcript:
                updates[block.line] = new
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if updates:
        rewrite(path, updates)


def module_installed(name):
    return subprocess.run(["/usr/bin/python3", "-c", f"import {name}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def rewrite(path, updates):
    lines = open(path, encoding="utf-8").read().split("\n")
    for start in sorted(updates, reverse=True):  # fence line numbers, 1-based
        end = next(j for j in range(start, len(lines)) if lines[j].startswith("```"))
        lines[start:end] = updates[start]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print(f"updated {os.path.relpath(path, ROOT)}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("pages", nargs="*", help="markdown files (default: README.md and docs/*.md)")
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"), help="the executable to document")
    p.add_argument("--all", action="store_true", help="also run the blocks marked slow")
    p.add_argument("--exact", action="store_true", help="compare numbers too (only timings masked)")
    p.add_argument("--update", action="store_true", help="rewrite transcripts with this run's output")
    args = p.parse_args()
    args.attnlab = os.path.abspath(args.attnlab)
    if not os.access(args.attnlab, os.X_OK):
        sys.exit(f"check_docs: no attnlab executable at {args.attnlab} (build it, or pass --attnlab PATH)")
    pages = args.pages or [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    # PYTHONPATH: the pages' python blocks import the PyTorch loader and reference as a user would,
    # from scripts/pytorch (docs/pytorch.md says so).
    env = dict(os.environ, PATH=os.path.dirname(args.attnlab) + os.pathsep + os.environ.get("PATH", ""),
               COLUMNS="200", PYTHONPATH=os.path.join(ROOT, "scripts", "pytorch"))
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for page in pages:
        check_page(os.path.abspath(page), args, env, counts)
    print(f"docs: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    sys.exit(1 if counts["failed"] else 0)


if __name__ == "__main__":
    main()
