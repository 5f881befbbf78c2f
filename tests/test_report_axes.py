#!/usr/bin/env python3
"""`attnlab report`'s axes and curves in a real browser (a ctest test; needs chromium, else skipped).

Trains three tiny copy runs differing only by --seed (probed, solved part-way) and a text
language model, writes a report of one seed, of the three and of the language model, and
checks in headless Chromium (tests/chromium_pipe.py), reading what is drawn (the lines'
points, mapped back to values through the axes' grid lines) against the runs' files:
  - every page passes tests/report_layout.py's checks at 1000, 1280 and 2000 px (nothing
    clipped, tick labels apart, round evenly spaced ticks, accuracy axes 0 to 1);
  - the solved step is a vertical line on every curve chart at summary.json's solved_at_step,
    labelled with it;
  - the constant learning rate is a value in words, not a chart;
  - the smoothing slider draws the debiased EMA (TensorBoard's) of metrics.csv's values, the
    raw line kept; the y-axis switch turns the loss chart linear and back to log;
  - each heat map's step ticks sit at their probed steps' columns;
  - each entropy chart's legend names every head of probe_heads.csv in its line's colour;
  - the three seeds are one group, legend "NAME (3 seeds: 0,1,2)", whose median line and
    min-max band at each step are those of the three metrics.csv files;
  - the language model's page has no exact-match chart; beside the seeds, the learning rates in
    words name the group and the model once each;
  - an entropy of 0 with rounding noise (1.1e-24) is "0 throughout" in words, no tick shows it.
Keeps screenshots of the curves under --artifacts.

Exit 0: passed; 1: failed; 77: no chromium on PATH (ctest: skipped).
"""
import csv
import json
import math
import os
import shutil
import statistics
import sys

from report_layout import layout_problems
from test_report_browser import (BUILD_ALL, TINY, attnlab, browser_test, check, check_page, fmt,
                                 load_page, read_csv)

COPY = ["--task", "copy", "--model", "encoder", "--d-model", "16", "--heads", "2", "--layers", "2", "--d-ff", "32",
        "--steps", "200", "--log-every", "5", "--eval-every", "10", "--min-len", "4", "--max-len", "4",
        "--vocab", "8", "--heldout", "50", "--lr", "0.003", "--target-patience", "4", "--probe-every", "10",
        "--threads", "1", "--quiet"]

# In the page: a chart (svg[data-chart=key] under #curves or a run's section) scrolled into
# view: its grid lines, lines, bands and marks in viewport coordinates, its title and scale.
CHART = """((key) => {
  const s = document.querySelector(`svg.chart[data-chart="${key}"]`);
  if (!s) return null;
  s.scrollIntoView({ block: "center" });
  const m = s.getScreenCTM(), at = (x, y) => { const p = new DOMPoint(x, y).matrixTransform(m); return [p.x, p.y]; };
  const pts = (e) => e.getAttribute("points").split(" ").filter(Boolean).map((xy) => at(...xy.split(",").map(Number)));
  const data = (e) => Object.assign({}, e.dataset);
  return {
    scale: s.dataset.yScale, title: s.querySelector("text.title").textContent,
    grid: [...s.querySelectorAll("line.grid")].map((g) => ({ axis: g.dataset.axis, value: Number(g.dataset.value),
      pos: g.dataset.axis === "x" ? at(Number(g.getAttribute("x1")), 0)[0] : at(0, Number(g.getAttribute("y1")))[1] })),
    lines: [...s.querySelectorAll("polyline")].map((e) => Object.assign(data(e), { cls: e.getAttribute("class"),
      stroke: e.getAttribute("stroke"), points: pts(e) })),
    bands: [...s.querySelectorAll("polygon.band")].map((e) => Object.assign(data(e), { points: pts(e) })),
    marks: [...s.querySelectorAll("line.mark")].map((e) => Object.assign(data(e), { x: at(Number(e.getAttribute("x1")), 0)[0] })),
    labels: [...s.querySelectorAll("text.mark-label")].map((t) => t.getAttribute("data-tip") || t.textContent),
  };
})"""
CURVE_KEYS = "[...document.querySelectorAll('#curves svg.chart')].map((s) => s.dataset.chart)"
SET = """((sel, value, event) => { const e = document.querySelector(sel); e.value = value;
  e.dispatchEvent(new Event(event)); return e.value; })"""


def axis_map(chart, axis):
    """Pixel -> value along one axis of a chart, from its grid lines (a log axis in log10)."""
    g = [(q["value"], q["pos"]) for q in chart["grid"] if q["axis"] == axis]
    log = axis == "y" and chart["scale"] == "log"
    (v0, p0), (v1, p1) = g[0], g[-1]
    f = (lambda v: math.log10(v)) if log else (lambda v: v)
    return lambda p: (10 ** (f(v0) + (p - p0) / (p1 - p0) * (f(v1) - f(v0))) if log
                      else v0 + (p - p0) / (p1 - p0) * (v1 - v0))


def drawn_values(chart, points):
    """A line's points as (step, value) through the chart's axes."""
    fx, fy = axis_map(chart, "x"), axis_map(chart, "y")
    return [(fx(x), fy(y)) for x, y in points]


def same_curve(got, want, what):
    """got, want: [(step, value)]; equal to 1e-6 of the value (the drawn coordinates are floats)."""
    ok = len(got) == len(want) and all(abs(a - c) < 1e-6 and abs(b - d) <= 1e-6 * max(1, abs(d))
                                       for (a, b), (c, d) in zip(got, want))
    check(ok, f"{what}: drawn {[(round(a, 3), round(b, 5)) for a, b in got[:4]]}..., "
              f"expected {[(c, round(d, 5)) for c, d in want[:4]]}... ({len(got)} vs {len(want)} points)")


def ema(values, w):
    """TensorBoard's smoothing: the EMA of weight w, debiased by 1 - w^n."""
    last, out = 0.0, []
    for n, v in enumerate(values, 1):
        last = last * w + (1 - w) * v
        out.append(last / (1 - w ** n))
    return out


def column(rows, col):
    return [(float(r["step"]), float(r[col])) for r in rows if r[col] != ""]


def check_single(b, run, name, artifacts):
    """One seed's page: the solved line, the constant learning rate, smoothing, the log
    switch, the entropy legends."""
    rows, summary = read_csv(os.path.join(run, "metrics.csv")), json.load(open(os.path.join(run, "summary.json")))
    solved = summary["solved_at_step"]
    check(0 < solved < summary["steps"], f"{name}: solved part-way ({solved} of {summary['steps']} steps)")
    keys = b.evaluate(CURVE_KEYS)
    check(keys == ["loss", "train_token_acc", "train_exact", "heldout_loss", "grad_norm", "weight_norm"],
          f"{name}: curve charts {keys}")
    for key in keys:
        chart = b.evaluate(f"{CHART}({json.dumps(key)})")
        marks = chart["marks"]
        at = axis_map(chart, "x")(marks[0]["x"]) if marks else None
        check(len(marks) == 1 and marks[0]["run"] == "0" and marks[0]["step"] == str(solved)
              and abs(at - solved) < 1e-6, f"{name} {key}: solved line {marks} at step {at}, summary.json {solved}")
        check(chart["labels"] == [f"solved at step {solved}"], f"{name} {key}: solved label {chart['labels']}")
    lr = {r["lr"] for r in rows}
    words = b.evaluate("""[...document.querySelectorAll('#curves .chart[data-chart="lr"]')]
                          .map((e) => e.tagName + ' ' + e.textContent)""")
    check(len(lr) == 1 and words == [f"DIV learning rate: {fmt(float(lr.pop()))} throughout"],
          f"{name}: the constant learning rate shown as {words}")
    check_heat_steps(b, run, name)
    check_smoothing(b, rows, name, artifacts)
    check_log_switch(b, rows, name)
    check_entropy_legends(b, run, name)


def check_heat_steps(b, run, name):
    """Each heat map's step ticks: round steps, each probed step's tick at its column's centre."""
    steps = list(dict.fromkeys(float(r["step"]) for r in read_csv(os.path.join(run, "probe_params.csv"))))
    for key in ("grad_norm", "update_ratio"):
        got = b.evaluate(f"""(() => {{
          const c = document.querySelector('canvas.heat-cells[data-key="{key}"]'), r = c.getBoundingClientRect();
          return {{ left: r.left, width: r.width, ticks: [...c.parentElement.querySelectorAll('text.tick')]
            .map((t) => {{ const q = t.getBoundingClientRect(); return [Number(t.dataset.value), (q.left + q.right) / 2]; }}) }};
        }})()""")
        cw = got["width"] / len(steps)
        placed = [(v, x) for v, x in got["ticks"] if v in steps]
        check(len(got["ticks"]) >= 2 and len(placed) == len(got["ticks"]) and
              all(abs(x - (got["left"] + (steps.index(v) + 0.5) * cw)) < 1 for v, x in placed),
              f"{name} {key} heat map: step ticks {got['ticks']}, columns from {got['left']} {cw:.1f} px wide, "
              f"steps {steps}")


def check_smoothing(b, rows, name, artifacts):
    want = column(rows, "train_token_acc")
    for w in (0.6, 0.9):
        check(b.evaluate(f"{SET}('#smoothing', {w}, 'input')") == str(w), f"{name}: smoothing slider set to {w}")
        chart = b.evaluate(f"{CHART}('train_token_acc')")
        lines = {(q["cls"], q["col"]): q for q in chart["lines"]}
        smooth, raw = lines.get(("line smooth", "train_token_acc")), lines.get(("line raw", "train_token_acc"))
        check(smooth is not None and raw is not None, f"{name}: smoothed and raw token accuracy at {w}: {list(lines)}")
        if smooth and raw:
            smoothed = ema([v for _, v in want], w)
            same_curve(drawn_values(chart, smooth["points"]), [(s, v) for (s, _), v in zip(want, smoothed)],
                       f"{name}: token accuracy smoothed at {w}")
            same_curve(drawn_values(chart, raw["points"]), want, f"{name}: raw token accuracy behind the smoothed")
        if w == 0.9:
            b.screenshot(os.path.join(artifacts, "axes-smoothed.png"))
    b.evaluate(f"{SET}('#smoothing', 0, 'input')")
    chart = b.evaluate(f"{CHART}('train_token_acc')")
    check(not [q for q in chart["lines"] if "smooth" in q["cls"]], f"{name}: a smoothed line at smoothing 0")


def check_log_switch(b, rows, name):
    want = column(rows, "loss")
    for scale, title in (("log", "loss (log scale)"), ("linear", "loss"), ("log", "loss (log scale)")):
        b.evaluate(f"{SET}('#curve-scale', {json.dumps('auto' if scale == 'log' else 'linear')}, 'change')")
        chart = b.evaluate(f"{CHART}('loss')")
        check(chart["scale"] == scale and chart["title"] == title, f"{name}: loss chart {chart['scale']} "
              f"titled {chart['title']!r} with the switch at {scale}")
        line = [q for q in chart["lines"] if q["col"] == "loss"]
        check(len(line) == 1, f"{name}: one loss line on the {scale} chart")
        if line:
            same_curve(drawn_values(chart, line[0]["points"]), want, f"{name}: loss on the {scale} axis")
        acc = b.evaluate(f"{CHART}('train_token_acc')")
        check(acc["scale"] == "linear", f"{name}: token accuracy {acc['scale']} with the switch at {scale}")


def check_entropy_legends(b, run, name):
    heads = {}
    for r in read_csv(os.path.join(run, "probe_heads.csv")):
        heads.setdefault(r["layer"], []).append(r["head"])
    for layer, hs in heads.items():
        hs = list(dict.fromkeys(hs))
        got = b.evaluate(f"""(() => {{
          const key = document.querySelector('.legend[data-legend="entropy {layer}"]');
          const chart = document.querySelector('svg.chart[data-chart="entropy {layer}"]');
          if (!key || !chart) return null;
          const rgb = (c) => {{ const e = document.createElement("i"); e.style.color = c; document.body.append(e);
                                const v = getComputedStyle(e).color; e.remove(); return v; }};
          return {{ items: [...key.querySelectorAll("span")].map((s) => [s.textContent,
                      getComputedStyle(s.querySelector("i")).backgroundColor]),
                    lines: [...chart.querySelectorAll("polyline")].map((l) => rgb(l.getAttribute("stroke"))) }};
        }})()""")
        check(got is not None and [t for t, _ in got["items"]] == [f"head {h}" for h in hs]
              and [c for _, c in got["items"]] == got["lines"],
              f"{name}: {layer} entropy legend {got}, heads {hs}")


def check_group(b, runs, name):
    """Three seeds: one group, its legend entry, median and band the three files'."""
    legend = b.evaluate("[...document.querySelectorAll('#curves .legend span')].map((s) => s.textContent)")
    check(legend == [f"{name} (3 seeds: 0,1,2)"], f"seed group legend {legend}")
    tables = [read_csv(os.path.join(r, "metrics.csv")) for r in runs]
    for key, col in (("train_token_acc", "train_token_acc"), ("loss", "loss"), ("train_token_acc", "heldout_token_acc")):
        at = {}
        for t in tables:
            for s, v in column(t, col):
                at.setdefault(s, []).append(v)
        steps = sorted(at)
        chart = b.evaluate(f"{CHART}({json.dumps(key)})")
        median = [q for q in chart["lines"] if q["cls"] == "median" and q["col"] == col and q["group"] == "0"]
        band = [q for q in chart["bands"] if q["col"] == col and q["group"] == "0"]
        members = sorted(q["run"] for q in chart["lines"] if q["cls"] == "member" and q["col"] == col)
        check(len(median) == 1 and len(band) == 1 and members == ["0", "1", "2"],
              f"{key} {col}: {len(median)} median lines, {len(band)} bands, member lines {members}")
        if not (median and band):
            continue
        same_curve(drawn_values(chart, median[0]["points"]), [(s, statistics.median(at[s])) for s in steps],
                   f"group median of {col}")
        ring = drawn_values(chart, band[0]["points"])
        same_curve(ring[:len(steps)], [(s, max(at[s])) for s in steps], f"group band top (max) of {col}")
        same_curve(ring[len(steps):][::-1], [(s, min(at[s])) for s in steps], f"group band bottom (min) of {col}")


def noisy_entropy(run, tmp):
    """A copy of a probed run whose first layer's entropies are 0 give or take rounding noise
    (0 and 1.1e-24 in turn); returns the copy and that layer."""
    copy = os.path.join(tmp, "noisy")
    shutil.copytree(run, copy)
    rows = read_csv(os.path.join(run, "probe_heads.csv"))
    layer = rows[0]["layer"]
    with open(os.path.join(copy, "probe_heads.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for i, r in enumerate(rows):
            w.writerow(dict(r, entropy="1.1e-24" if i % 2 else "0") if r["layer"] == layer else r)
    return copy, layer


def check_constant_entropy(b, layer):
    """A layer's entropy of 0 with rounding noise: its value in words, no tick like 1.1e-24."""
    got = b.evaluate(f"""[...document.querySelectorAll('.chart[data-chart="entropy {layer}"]')]
                         .map((e) => e.tagName + ' ' + e.textContent)""")
    check(got == [f"DIV {layer}: head entropy (nats): 0 throughout"], f"noisy entropy of {layer} shown as {got}")
    key = b.evaluate(f"""document.querySelectorAll('.legend[data-legend="entropy {layer}"]').length""")
    check(key == 0, f"a legend of heads beside {layer}'s entropy in words")
    ticks = b.evaluate("[...document.querySelectorAll('text.tick')].map((t) => t.textContent)")
    check(ticks and not [t for t in ticks if "e-2" in t], f"ticks of rounding noise: {[t for t in ticks if 'e-2' in t]}")


def check_group_lr(b, name, other):
    """A seed group and another run, each at its own constant learning rate: one value per name."""
    words = b.evaluate("""document.querySelector('#curves .chart[data-chart="lr"]').textContent""")
    want = f"learning rate: {name} 0.003, {other} 0.001 throughout"
    check(words == want, f"learning rates in words {words!r}, expected {want!r}")


def check_language_model(b, name):
    charts = b.evaluate("[...document.querySelectorAll('#curves .chart')].map((s) => s.dataset.chart)")
    check("train_exact" not in charts and "train_token_acc" in charts, f"{name}: language model's curves {charts}")
    note = b.evaluate("document.querySelector('#curves p.note').textContent")
    check("Exact match is left out for language models" in note, f"{name}: no word on the left-out exact match")


def page_of(exe, tmp, name, runs):
    page = os.path.join(tmp, name + ".html")
    attnlab(exe, "report", *runs, "--out", page)
    return page


def open_checked(exe_browser, page, artifacts, shot):
    """The page opened, built whole, its layout checked, its curves screenshotted."""
    b = load_page(exe_browser, page)
    check(b.evaluate(BUILD_ALL) == 0, f"{page}: parts not built")
    for problem in layout_problems(b):
        check(False, f"{os.path.basename(page)}: {problem}")
    b.evaluate("document.getElementById('curves').scrollIntoView()")
    b.screenshot(os.path.join(artifacts, shot))
    return b


def checks(args, exe_browser, tmp):
    seeds = [os.path.join(tmp, f"copy-{s}") for s in range(3)]
    for s, run in enumerate(seeds):
        attnlab(args.attnlab, "train", *COPY, "--seed", str(s), "--run", run)
    with open(os.path.join(tmp, "corpus.txt"), "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 60)
    lm = os.path.join(tmp, "textlm")
    attnlab(args.attnlab, "train", "--task", "text", "--file", os.path.join(tmp, "corpus.txt"), "--seq-len", "16",
            "--model", "decoder", "--probe-every", "10", *TINY, "--run", lm)
    noisy, layer = noisy_entropy(seeds[0], tmp)
    for page, runs, shot, checks in (
            (page_of(args.attnlab, tmp, "one-seed", seeds[:1]), seeds[:1], "axes-one-seed.png",
             lambda b: check_single(b, seeds[0], "copy-0", args.artifacts)),
            (page_of(args.attnlab, tmp, "seeds", seeds), seeds, "axes-seeds.png",
             lambda b: check_group(b, seeds, "copy")),
            (page_of(args.attnlab, tmp, "textlm", [lm]), [lm], "axes-textlm.png",
             lambda b: check_language_model(b, "textlm")),
            (page_of(args.attnlab, tmp, "seeds-and-lm", seeds + [lm]), seeds + [lm], "axes-seeds-and-lm.png",
             lambda b: check_group_lr(b, "copy", "textlm")),
            (page_of(args.attnlab, tmp, "noisy", [noisy]), [noisy], "axes-noisy-entropy.png",
             lambda b: check_constant_entropy(b, layer))):
        b = open_checked(exe_browser, page, args.artifacts, shot)
        try:
            checks(b)
        finally:
            b.close()
    check_page(exe_browser, page_of(args.attnlab, tmp, "seeds-full", seeds), seeds, args.attnlab, {},
               args.artifacts)


def main():
    return browser_test("test_report_axes", checks)


if __name__ == "__main__":
    sys.exit(main())
