#!/usr/bin/env python3
"""The report's sharpness charts against probe_sharpness.csv, in headless Chromium (a ctest test; needs
chromium, else skipped).

Two tiny runs with train --probe-sharpness: adamw (a decoder, with the gradient-flow probes too: the charts
of H and of P^-1 H) and sgd with a linear schedule (an encoder, no other probe: the chart of H). On each
page, per operator:
  - one chart, its lambda_max points the CSV's steps and values (the CSV's text in data-value and in the
    tip), its dashed threshold points the CSV's non-empty thresholds (none for H under adamw);
  - every point where the chart's own grid lines put its step and value (a log axis when all are positive);
  - the sentence on the last probe: its step, lambda_max and share of the threshold;
  - the page passes tests/test_report_browser.py's checks (layout, no console errors, nothing fetched).
A screenshot of the charts goes to --artifacts.
"""
import json
import math
import os
import sys

import test_report_browser as trb
from test_report_browser import attnlab, check, load_page, read_csv

CHARTS = """JSON.stringify([...document.querySelectorAll('#sharpness-RI svg.chart')].map((box) => ({
  key: box.dataset.chart, scale: box.dataset.yScale,
  grid: [...box.querySelectorAll("line.grid")].map((l) => ({ axis: l.dataset.axis, value: +l.dataset.value,
    x: +l.getAttribute("x1"), y: +l.getAttribute("y1") })),
  points: [...box.querySelectorAll("circle.pt")].map((c) => ({ col: c.dataset.col, run: c.dataset.run,
    x: c.dataset.x, value: c.dataset.value, tip: c.dataset.tip, cx: +c.getAttribute("cx"), cy: +c.getAttribute("cy") })),
  dashed: [...box.querySelectorAll("polyline")].filter((p) => p.getAttribute("stroke-dasharray"))
    .map((p) => p.dataset.col),
  last: (({ step, value, share }) => ({ step, value, share }))(box.parentNode.querySelector("p[data-step]").dataset) })))"""
SMALL = ["--vocab", "6", "--min-len", "4", "--max-len", "4", "--d-model", "16", "--heads", "2", "--layers", "1",
         "--d-ff", "32", "--batch-size", "8", "--heldout", "40", "--steps", "12", "--eval-every", "6", "--threads", "1",
         "--target", "0", "--quiet"]
RUNS = {"adamw": ["--task", "reverse", "--model", "decoder", "--lr", "0.003", "--probe-sharpness", "3",
                  "--probe-every", "6"],
        "sgd": ["--task", "copy", "--optimizer", "sgd", "--lr", "0.5", "--weight-decay", "0", "--schedule", "linear",
                "--min-lr", "0.05", "--probe-sharpness", "2"]}


def placed(grid, axis, value, log):
    """Where the chart's grid lines of `axis` put `value` (linear between the outermost two, or in log10)."""
    lines = sorted((g for g in grid if g["axis"] == axis), key=lambda g: g["value"])
    a, b = lines[0], lines[-1]
    f = math.log10 if log else (lambda v: v)
    at = "x" if axis == "x" else "y"
    return a[at] + (f(value) - f(a["value"])) / (f(b["value"]) - f(a["value"])) * (b[at] - a[at])


def check_chart(name, chart, rows, op, ri):
    what = f"{name} {chart['key']}"
    mine = [r for r in rows if r["operator"] == op]
    drawn = [(p["x"], p["value"]) for p in chart["points"] if p["col"] == "lambda_max"]
    check(drawn == [(r["step"], r["lambda_max"]) for r in mine],
          f"{what}: lambda_max points {drawn}, the CSV's {[(r['step'], r['lambda_max']) for r in mine]}")
    limit = [(p["x"], p["value"]) for p in chart["points"] if p["col"] == "threshold"]
    want = [(r["step"], r["threshold"]) for r in mine if r["threshold"] != ""]
    check(limit == want, f"{what}: threshold points {limit}, the CSV's {want}")
    check(chart["dashed"] == (["threshold"] if want else []), f"{what}: dashed lines {chart['dashed']}")
    log = chart["scale"] == "log"
    check(log == all(float(v) > 0 for _, v in drawn + limit), f"{what}: a {chart['scale']} axis")
    for p in chart["points"]:
        check(p["run"] == str(ri) and p["tip"] == ("\u03bb_max" if p["col"] == "lambda_max" else "threshold") +
              f"\nstep {p['x']}: {p['value']}", f"{what}: point tip {p['tip']!r} (run {p['run']})")
        x, y = placed(chart["grid"], "x", float(p["x"]), False), placed(chart["grid"], "y", float(p["value"]), log)
        check(abs(p["cx"] - x) < 0.05 and abs(p["cy"] - y) < 0.05,
              f"{what}: step {p['x']} value {p['value']} drawn at ({p['cx']:.2f}, {p['cy']:.2f}), its grid puts it at "
              f"({x:.2f}, {y:.2f})")
    last = mine[-1]
    share = float(last["lambda_max"]) / float(last["threshold"]) if last["threshold"] else None
    got = chart["last"]
    check(got["step"] == last["step"] and got["value"] == last["lambda_max"] and
          (got["share"] == "" if share is None else math.isclose(float(got["share"]), share, rel_tol=1e-12)),
          f"{what}: the last probe's sentence says {got}, the CSV's last row {last}")


def checks(args, exe_browser, tmp):
    exe = args.attnlab
    for name, flags in RUNS.items():
        run = os.path.join(tmp, name)
        attnlab(exe, "train", "--run", run, *SMALL, *flags)
        rows = read_csv(os.path.join(run, "probe_sharpness.csv"))
        ops = list(dict.fromkeys(r["operator"] for r in rows))
        check(ops == (["hessian", "preconditioned"] if name == "adamw" else ["hessian"]), f"{name}: operators {ops}")
        page = os.path.join(tmp, name + ".html")
        attnlab(exe, "report", run, "--out", page)
        trb.check_page(exe_browser, page, [run], exe, {}, args.artifacts)
        b = load_page(exe_browser, page, 1600)
        try:
            b.evaluate(trb.BUILD_ALL)
            charts = json.loads(b.evaluate(CHARTS.replace("RI", "0")))
            check([c["key"] for c in charts] == ["sharpness " + op for op in ops],
                  f"{name}: charts {[c['key'] for c in charts]} for operators {ops}")
            for chart, op in zip(charts, ops):
                check_chart(name, chart, rows, op, 0)
            b.evaluate("document.getElementById('sharpness-0').scrollIntoView()")
            b.screenshot(os.path.join(args.artifacts, f"sharpness_{name}.png"))
        finally:
            b.close()


def main():
    return trb.browser_test("test_report_sharpness", checks)


if __name__ == "__main__":
    sys.exit(main())
