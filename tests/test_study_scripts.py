#!/usr/bin/env python3
"""The study scripts run end to end on a tiny configuration (a ctest test).

  - scripts/gradient_flow_study.py --tiny: every run of both parts, its two CSVs (one row per
    (arch, norm, depth, block, parameter) at initialisation, with the head; one per warm-up run)
    and its three figures; --plots-only redraws them from the CSVs alone;
  - scripts/learning_speed_study.py --tables-only: the table of docs/learning_speed.csv, with its
    layout column, rebuilt into a copy of experiments.md.

    test_study_scripts.py --attnlab BUILD/attnlab
Exit 0: passed; 1: failed; 77: matplotlib cannot be imported (ctest: skipped).
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILURES = []


def expect(ok, what):
    if not ok:
        FAILURES.append(what)
        print(f"FAILED: {what}", file=sys.stderr)


def run(args):
    r = subprocess.run([sys.executable] + args, capture_output=True, text=True)
    expect(r.returncode == 0, f"{' '.join(args)} exits 0 (got {r.returncode}: {r.stderr.strip()[-500:]})")
    return r.stdout


def test_gradient_flow(exe, work):
    out, runs = os.path.join(work, "docs"), os.path.join(work, "runs")
    script = os.path.join(ROOT, "scripts", "gradient_flow_study.py")
    printed = run([script, "--tiny", "--attnlab", exe, "--out", out, "--runs", runs])
    with open(os.path.join(out, "gradient_flow_init.csv")) as f:
        init = list(csv.DictReader(f))
    # 2 archs x 2 norms x depths 1, 2 -> 3 blocks each of 5 parameters, and a head per depth.
    expect(len(init) == 4 * (3 * 5 + 2), f"init rows: one per arch, norm, depth, block, parameter (got {len(init)})")
    expect(all(float(r["grad_norm"]) > 0 for r in init), "every gradient norm at initialisation is positive")
    heads = {(r["arch"], r["norm"], r["layers"]) for r in init if r["param"] == "head.weight"}
    expect(len(heads) == 8, f"a head row per arch, norm and depth (got {sorted(heads)})")
    with open(os.path.join(out, "gradient_flow_warmup.csv")) as f:
        warm = list(csv.DictReader(f))
    expect(len(warm) == 4, f"warm-up rows: 2 norms x with and without warm-up (got {len(warm)})")
    expect(all(r["diverged"] in ("0", "1") and r["max_grad_norm_first_100"] for r in warm), "warm-up rows filled")
    expect("slope of log |grad| on log L" in printed, "the slopes are printed")
    figures = ["gradient_flow_layers.png", "gradient_flow_depth.png", "gradient_flow_warmup.png"]
    for name in figures:
        path = os.path.join(out, "figures", name)
        expect(os.path.exists(path) and os.path.getsize(path) > 1000, f"{name} written")
        os.remove(path)
    shutil.rmtree(runs)
    run([script, "--plots-only", "--out", out, "--runs", runs])
    expect(all(os.path.exists(os.path.join(out, "figures", n)) for n in figures), "--plots-only redraws every figure")
    expect(not os.path.exists(runs), "--plots-only runs nothing")


def test_learning_speed_tables(work):
    docs = os.path.join(work, "ls-docs")
    os.makedirs(docs)
    for name in ("learning_speed.csv", "experiments.md"):
        shutil.copy(os.path.join(ROOT, "docs", name), docs)
    run([os.path.join(ROOT, "scripts", "learning_speed_study.py"), "--tables-only", "--docs", docs])
    with open(os.path.join(docs, "experiments.md")) as f:
        text = f.read()
    expect("| setting | implementation | init | layout |" in text, "the learning-speed table has a layout column")
    with open(os.path.join(docs, "learning_speed.csv")) as f:
        rows = list(csv.DictReader(f))
    expect(rows and all(r["layout"] in ("special", "bare") for r in rows), "every CSV row names its layout")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", required=True)
    args = p.parse_args()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib cannot be imported: the study scripts' test is skipped", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory() as work:
        test_gradient_flow(args.attnlab, work)
        test_learning_speed_tables(work)
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
