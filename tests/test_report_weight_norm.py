#!/usr/bin/env python3
"""`attnlab report`'s weight-norm, held-out-loss and in-context-loss charts in a real browser (a ctest test;
needs chromium, else skipped).

Trains a tiny reverse run and a tiny repeat language model, writes a report of each, and checks in headless
Chromium (tests/chromium_pipe.py), reading the drawn lines' points back through the charts' axes
(tests/test_report_axes.py's helpers):
  - the "weight_norm" chart draws metrics.csv's weight_norm column at its steps, every row;
  - the "heldout_loss" chart of the sequence task draws its teacher-forced held-out loss at each evaluation;
  - the repeat run's "in_context_loss" chart draws its negative values on a linear axis, and a sequence task,
    whose column is empty, has no such chart.
Keeps screenshots under --artifacts.

Exit 0: passed; 1: failed; 77: no chromium on PATH (ctest: skipped).
"""
import os
import sys

from test_report_axes import CHART, CURVE_KEYS, drawn_values, open_checked, page_of, same_curve
from test_report_browser import attnlab, browser_test, check, read_csv

COMMON = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "16", "--steps", "60",
          "--log-every", "5", "--eval-every", "20", "--heldout", "40", "--threads", "1", "--quiet"]
REVERSE = ["--task", "reverse", "--vocab", "6", "--min-len", "3", "--max-len", "6", "--target", "0"] + COMMON
REPEAT = ["--task", "repeat", "--vocab", "6", "--min-len", "3", "--max-len", "6", "--model", "decoder"] + COMMON


def check_chart(b, run, col, scale):
    """The chart of metrics.csv's `col` draws every value the column has, at its step, on `scale`."""
    rows = read_csv(os.path.join(run, "metrics.csv"))
    want = [(float(r["step"]), float(r[col])) for r in rows if r[col] != ""]
    check(len(want) >= 3, f"{col}: {len(want)} values in {run}'s metrics.csv")
    chart = b.evaluate(f"{CHART}('{col}')")
    check(chart is not None, f"no {col} chart")
    if chart is None:
        return
    check(chart["scale"] == scale, f"{col} chart on a {chart['scale']} scale, expected {scale}")
    lines = [q for q in chart["lines"] if q.get("col") == col and "smooth" not in q["cls"]]
    check(len(lines) == 1, f"{col} lines {[(q['cls'], q.get('col')) for q in chart['lines']]}")
    if lines:
        same_curve(drawn_values(chart, lines[0]["points"]), want, col)


def checks(args, exe_browser, tmp):
    seq, lm = os.path.join(tmp, "reverse"), os.path.join(tmp, "repeat")
    attnlab(args.attnlab, "train", *REVERSE, "--run", seq)
    attnlab(args.attnlab, "train", *REPEAT, "--run", lm)
    b = open_checked(exe_browser, page_of(args.attnlab, tmp, "reverse", [seq]), args.artifacts, "weight-norm.png")
    try:
        check_chart(b, seq, "weight_norm", "linear")
        check_chart(b, seq, "heldout_loss", "log")
        keys = b.evaluate(CURVE_KEYS)
        check("in_context_loss" not in keys, f"a sequence task has no in-context chart: charts {keys}")
    finally:
        b.close()
    b = open_checked(exe_browser, page_of(args.attnlab, tmp, "repeat", [lm]), args.artifacts, "in-context-loss.png")
    try:
        check_chart(b, lm, "in_context_loss", "linear")
        check_chart(b, lm, "weight_norm", "linear")
    finally:
        b.close()


def main():
    return browser_test("test_report_weight_norm", checks)


if __name__ == "__main__":
    sys.exit(main())
