#!/usr/bin/env python3
"""`attnlab report`'s gradient noise scale chart in a real browser (a ctest test; needs chromium, else skipped).

Trains a tiny reverse run with --noise-scale --grad-accum 4 and one without, writes a report of each,
and checks in headless Chromium (tests/chromium_pipe.py), reading the drawn line's points back
through the chart's axes (tests/test_report_axes.py's helpers):
  - the "noise_scale" chart draws metrics.csv's noise_scale column at its steps, every positive value
    (a log axis), on a log scale;
  - a run without --noise-scale has no such chart.
Keeps a screenshot of the curves under --artifacts.

Exit 0: passed; 1: failed; 77: no chromium on PATH (ctest: skipped).
"""
import os
import sys

from test_report_axes import CHART, CURVE_KEYS, drawn_values, open_checked, page_of, same_curve
from test_report_browser import attnlab, browser_test, check, read_csv

REVERSE = ["--task", "reverse", "--vocab", "6", "--min-len", "3", "--max-len", "6", "--d-model", "16", "--heads", "2",
           "--layers", "1", "--d-ff", "32", "--batch-size", "16", "--grad-accum", "4", "--steps", "60",
           "--log-every", "5", "--eval-every", "20", "--heldout", "40", "--target", "0", "--threads", "1", "--quiet"]


def check_noise_chart(b, run):
    rows = read_csv(os.path.join(run, "metrics.csv"))
    want = [(float(r["step"]), float(r["noise_scale"])) for r in rows if r["noise_scale"] != ""]
    check(len(want) == len(rows), f"noise_scale in {len(want)} of {len(rows)} rows")
    shown = [(s, v) for s, v in want if v > 0]
    check(len(shown) >= len(want) // 2, f"{len(shown)} of {len(want)} noise scales positive")
    chart = b.evaluate(f"{CHART}('noise_scale')")
    check(chart is not None, "no noise_scale chart")
    if chart is None:
        return
    check(chart["scale"] == "log", f"noise_scale chart on a {chart['scale']} scale")
    check(chart["title"].startswith("gradient noise scale B_simple"), f"noise_scale chart titled {chart['title']}")
    lines = [q for q in chart["lines"] if q.get("col") == "noise_scale" and "smooth" not in q["cls"]]
    check(len(lines) == 1, f"noise_scale lines {[(q['cls'], q.get('col')) for q in chart['lines']]}")
    if lines:
        same_curve(drawn_values(chart, lines[0]["points"]), shown, "noise_scale")


def checks(args, exe_browser, tmp):
    on, off = os.path.join(tmp, "noisy"), os.path.join(tmp, "plain")
    attnlab(args.attnlab, "train", *REVERSE, "--noise-scale", "--run", on)
    attnlab(args.attnlab, "train", *REVERSE, "--run", off)
    b = open_checked(exe_browser, page_of(args.attnlab, tmp, "noise", [on]), args.artifacts, "noise-scale.png")
    try:
        check_noise_chart(b, on)
    finally:
        b.close()
    b = open_checked(exe_browser, page_of(args.attnlab, tmp, "plain", [off]), args.artifacts, "noise-scale-off.png")
    try:
        keys = b.evaluate(CURVE_KEYS)
        check("noise_scale" not in keys and "grad_norm" in keys, f"a run without --noise-scale: charts {keys}")
    finally:
        b.close()


def main():
    return browser_test("test_report_noise_scale", checks)


if __name__ == "__main__":
    sys.exit(main())
