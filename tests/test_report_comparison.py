#!/usr/bin/env python3
"""`attnlab report` pages of several runs and of a sweep, in headless Chromium (a ctest test;
needs chromium, else skipped). Checks, in the page:
  - two runs of one task differing in two settings: the settings table has exactly those two
    rows, each cell config.ini's value, and counts the identical settings; no task warning;
  - both runs are in directories named rev: the page names them apart, in the table, the
    curves' legend and the title; the same directory given twice too;
  - the nav has a link per run for each section drawn per run, and after a click on each, the
    section's heading lies below the sticky header, in the window;
  - two runs of different tasks: a visible warning naming both;
  - a sweep over lr x seed (two points at each lr): each scatter's points at distinct positions,
    the lr axis logarithmic (points where the ticks' log scale puts their lr) with round tick
    labels that do not overlap; solved_at_step -1 shown as "not solved", last in the table
    whichever way it is sorted, and drawn in the "not solved" band of its scatter;
  - the parallel coordinates: one line per summary.csv row, through each axis at the place the
    axis's ticks give its CSV value; the pointer on a line names its run.
Keeps screenshots under --artifacts. Exit 0: passed; 1: failed; 77: no chromium on PATH.
"""
import csv
import json
import math
import os
import subprocess
import sys

import test_report_browser as base
from test_report_browser import TINY, attnlab, check, check_page, load_page, read_csv

PROBED = [*TINY, "--probe-every", "10", "--heldout", "50"]


def with_flag(flags, name, value):
    """flags with flag `name`'s value replaced by value."""
    at = flags.index(name)
    return [*flags[:at + 1], value, *flags[at + 2:]]


def config(run):
    """config.ini's settings as {name: value}."""
    pairs = (line.split("=", 1) for line in open(os.path.join(run, "config.ini")) if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def js(b, expression):
    """A JavaScript expression's value, passed as JSON."""
    return json.loads(b.evaluate(f"JSON.stringify({expression})") or "null")


def shoot(b, artifacts, name):
    path = os.path.join(artifacts, name + ".png")
    b.screenshot(path)
    check(os.path.exists(path), f"no screenshot {path}")


def check_diff(b, runs, what):
    """The settings table: a row per setting whose config.ini values differ, each cell the value."""
    cfgs = [config(r) for r in runs]
    keys = sorted(set(cfgs[0]) | set(cfgs[1]))
    differ = [k for k in keys if cfgs[0].get(k) != cfgs[1].get(k)]
    rows = js(b, """[...document.querySelectorAll('#settings-diff tr[data-setting]')].map((tr) =>
                     [tr.dataset.setting, ...[...tr.querySelectorAll('td')].map((td) => td.textContent)])""")
    want = [[k, cfgs[0][k], cfgs[1][k]] for k in differ]
    check(sorted(rows) == want, f"{what}: settings rows {rows}, config.ini differs in {want}")
    same = b.evaluate("document.querySelector('#settings-same summary').textContent")
    check(same == f"{len(keys) - len(differ)} settings identical", f"{what}: {same!r}")
    return differ


def check_names(b, want, what):
    """The runs' names in the settings table's header, the curves' legend and the title."""
    heads = js(b, "[...document.querySelectorAll('#settings-diff th[data-run] a')].map((a) => a.textContent)")
    check(heads == want and len(set(heads)) == len(heads), f"{what}: runs named {heads}, expected {want}")
    items = js(b, "[...document.querySelectorAll('#curves .legend span')].map((s) => s.textContent)")
    check(items[:len(want)] == want, f"{what}: the curves' legend {items}, expected {want}")
    title = b.evaluate("document.title")
    check(title == "attnlab report: " + ", ".join(want), f"{what}: title {title!r}")


# In the page: a click on the nav link to #id, then where the target's heading and the header are.
CLICK = """(async (id) => {
  const a = [...document.querySelectorAll('#nav a')].find((x) => x.getAttribute('href') === '#' + id);
  if (!a) return null;
  a.click();
  for (let k = 0; k < 3; ++k) await new Promise((done) => requestAnimationFrame(done));
  const t = document.getElementById(id), h = t.querySelector('h2') || t;
  const box = h.getBoundingClientRect(), head = document.querySelector('header').getBoundingClientRect();
  return { top: box.top, bottom: box.bottom, height: box.height, header: head.bottom, window: innerHeight,
           text: h.textContent };
})"""


def check_nav(b, runs, names, artifacts):
    """A nav link per run for each section drawn per run; each click puts the section's heading
    below the sticky header, inside the window."""
    hrefs = js(b, "[...document.querySelectorAll('#nav a')].map((a) => a.getAttribute('href'))")
    for kind in ("run", "gradients", "attention", "examples"):
        for ri in range(len(runs)):
            check(hrefs.count(f"#{kind}-{ri}") == 1, f"nav: {hrefs.count(f'#{kind}-{ri}')} links to #{kind}-{ri}")
            got = b.evaluate(f"{CLICK}({json.dumps(f'{kind}-{ri}')})")
            if got is None:
                continue
            ok = got["height"] > 0 and got["top"] >= got["header"] and got["bottom"] <= got["window"]
            check(ok, f"nav #{kind}-{ri}: heading {got['text']!r} at {got['top']:.0f}..{got['bottom']:.0f} px, "
                      f"header ends at {got['header']:.0f}, window {got['window']}")
            check(names[ri] in got["text"], f"nav #{kind}-{ri}: heading {got['text']!r} does not name {names[ri]}")
            if (kind, ri) == ("gradients", 1):
                shoot(b, artifacts, "comparison_nav_gradients_1")
    b.evaluate("window.scrollTo(0, 0)")


def check_pair(browser, exe, runs, tmp, artifacts):
    """Two reverse runs differing in lr and layers, in directories both named rev."""
    page = os.path.join(tmp, "pair.html")
    attnlab(exe, "report", *runs, "--out", page)
    check_page(browser, page, runs, exe, {}, artifacts)  # the one-run checks, per run, side by side
    b = load_page(browser, page, 900)
    try:
        shoot(b, artifacts, "comparison_settings")
        differ = check_diff(b, runs, "pair")
        check(differ == ["layers", "lr"], f"pair: settings differing {differ}, the runs differ in layers and lr")
        names = ["one/rev", "two/rev"]
        check_names(b, names, "pair")
        check(b.evaluate("!document.getElementById('task-warning')"), "pair: a task warning for runs of one task")
        check_nav(b, runs, names, artifacts)
    finally:
        b.close()
    page = os.path.join(tmp, "twice.html")
    attnlab(exe, "report", runs[0], runs[0], "--out", page)
    b = load_page(browser, page, 700)
    try:
        check_names(b, ["rev (1)", "rev (2)"], "the same run twice")
    finally:
        b.close()


def check_tasks_differ(browser, exe, runs, tmp, artifacts):
    """A reverse run and a copy run: a warning, visible above the curves, naming both tasks."""
    page = os.path.join(tmp, "tasks.html")
    attnlab(exe, "report", *runs, "--out", page)
    b = load_page(browser, page, 900)
    try:
        shoot(b, artifacts, "comparison_tasks_differ")
        got = js(b, """(() => { const w = document.getElementById('task-warning'); if (!w) return null;
          const r = w.getBoundingClientRect(), c = document.getElementById('curves').getBoundingClientRect();
          return { text: w.textContent, height: r.height, above: r.bottom <= c.top,
                   visible: getComputedStyle(w).visibility === 'visible' && r.width > 0 }; })()""")
        check(got is not None, "tasks differ: no warning")
        if got:
            tasks = [f"{config(r)['task']}: {os.path.basename(r)}" for r in runs]  # each task with its run
            check(got["visible"] and got["height"] > 0 and got["above"],
                  f"tasks differ: warning not shown above the curves {got}")
            check(all(t in got["text"] for t in tasks),
                  f"tasks differ: warning {got['text']!r} does not name {tasks}")
    finally:
        b.close()


# In the page: each scatter's points (cx, cy, data-x, data-point, data-not-solved, in viewport
# px), its x tick labels (text, centre, box) and y tick labels' boxes, and its not-solved band.
SCATTERS = """[...document.querySelectorAll('svg[data-scatter]')].map((s) => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const band = s.querySelector('rect.not-solved-band');
  return { param: s.dataset.scatter, band: band && box(band),
    points: [...s.querySelectorAll('circle')].map((c) => { const r = box(c);
      return { x: (r[0] + r[2]) / 2, y: (r[1] + r[3]) / 2, value: c.dataset.x, run: c.dataset.point,
               out: c.dataset.notSolved === 'yes' }; }),
    xticks: [...s.querySelectorAll('text.xtick')].map((t) => [t.textContent, Number(t.dataset.tick), box(t)]),
    labels: [...s.querySelectorAll('text.xtick, text.ytick')].map(box) };
})"""


def overlapping(boxes):
    """Pairs of boxes [left, top, right, bottom] that overlap."""
    return [(a, c) for i, a in enumerate(boxes) for c in boxes[i + 1:]
            if a[0] < c[2] and c[0] < a[2] and a[1] < c[3] and c[1] < a[3]]


def is_round(text):
    """1, 2 or 5 times a power of ten."""
    if float(text) <= 0:
        return False
    m = float(text) / 10 ** math.floor(math.log10(float(text)))
    return any(abs(m - r) < 1e-9 for r in (1, 2, 5))


def check_lr_axis(s, table):
    """lr's scatter: a log axis, round ticks, each lr's points centred where the ticks put it."""
    ticks = s["xticks"]
    round_ticks = len(ticks) >= 2 and all(is_round(t[0]) for t in ticks)
    check(round_ticks, f"lr axis ticks {[t[0] for t in ticks]} not 1-2-5 (all > 0)")
    if not round_ticks:
        return
    (_, va, ba), (_, vc, bc) = ticks[0], ticks[-1]
    xa, xc = (ba[0] + ba[2]) / 2, (bc[0] + bc[2]) / 2
    per_decade = (xc - xa) / (math.log10(vc) - math.log10(va))
    for t, v, bx in ticks:
        x = xa + (math.log10(v) - math.log10(va)) * per_decade
        at = (bx[0] + bx[2]) / 2
        check(abs(at - x) < 1, f"lr axis: tick {t} at {at:.1f} px, log scale puts it at {x:.1f}")
    for lr in {row["lr"] for row in table}:
        xs = [p["x"] for p in s["points"] if p["value"] == lr]
        x = xa + (math.log10(float(lr)) - math.log10(va)) * per_decade
        check(xs and abs(sum(xs) / len(xs) - x) < 1, f"lr axis: points of lr {lr} centred at {xs}, log scale: {x:.1f}")


def check_scatters(b, table, artifacts):
    """Every point of every scatter apart, the lr axis, labels apart; solved_at_step's scatter."""
    scatters = js(b, SCATTERS)
    check(sorted(s["param"] for s in scatters) == ["lr", "seed"], f"scatters of {[s['param'] for s in scatters]}")
    for s in scatters:
        places = {(round(p["x"], 1), round(p["y"], 1)) for p in s["points"]}
        check(len(s["points"]) == len(table) == len(places), f"{s['param']}: {len(places)} places for "
              f"{len(s['points'])} points, summary.csv has {len(table)} rows")
        check(not overlapping(s["labels"]), f"{s['param']}: tick labels overlap {overlapping(s['labels'])[:2]}")
        if s["param"] == "lr":
            check_lr_axis(s, table)
    b.evaluate("""(() => { const p = document.getElementById('sweep-outcome'); p.value = 'solved_at_step';
                           p.dispatchEvent(new Event('change')); })()""")
    b.evaluate("document.getElementById('sweep-outcome').scrollIntoView()")
    shoot(b, artifacts, "sweep_not_solved")
    solved = {row["run"]: row["solved_at_step"] for row in table}
    for s in js(b, SCATTERS):
        band = s["band"]
        check(band is not None, f"{s['param']}: no 'not solved' band")
        for p in s["points"] if band else []:
            inside = band[1] <= p["y"] <= band[3]
            check(inside == (solved[p["run"]] == "-1") == p["out"],
                  f"{s['param']}: {p['run']} (solved_at_step {solved[p['run']]}) at y {p['y']:.0f}, "
                  f"band {band[1]:.0f}..{band[3]:.0f}")


# In the page: the sweep table's solved_at_step column top to bottom after a click on its head.
SORTED = """(() => { document.querySelector('#sweep-table th[data-col="solved_at_step"]').click();
  return [...document.querySelectorAll('#sweep-table td[data-col="solved_at_step"]')].map((td) => td.textContent); })()"""


def check_sorting(b, table):
    """solved_at_step sorted either way: the solved steps in order, "not solved" last."""
    steps = [int(row["solved_at_step"]) for row in table if row["solved_at_step"] != "-1"]
    unsolved = ["not solved"] * sum(row["solved_at_step"] == "-1" for row in table)
    for direction in (1, -1):
        got = js(b, SORTED)
        want = [str(v) for v in sorted(steps, reverse=direction < 0)] + unsolved
        check(got == want, f"sweep table sorted by solved_at_step ({direction}): {got}, expected {want}")


# In the page: the parallel coordinates' axes (name, scale, x, ticks' [value, y], the not-solved
# place's y) and lines (run, vertices), in the svg's own coordinates.
PARALLEL = """(() => { const s = document.getElementById('sweep-parallel-svg'); if (!s) return null;
  s.scrollIntoView({ block: 'center' });
  return { axes: [...s.querySelectorAll('g.pc-axis')].map((g) => ({ name: g.dataset.axis, scale: g.dataset.scale,
      x: Number(g.querySelector('line').getAttribute('x1')),
      ticks: [...g.querySelectorAll('line.pc-tick')].map((t) => [t.dataset.tick, Number(t.getAttribute('y1'))]),
      out: g.querySelector('text.not-solved') && Number(g.querySelector('text.not-solved').dataset.y) })),
    lines: [...s.querySelectorAll('polyline.pc-line')].map((l) => ({ run: l.dataset.point,
      points: l.getAttribute('points').split(' ').map((p) => p.split(',').map(Number)) })),
    labels: [...s.querySelectorAll('text')].map((t) => { const r = t.getBoundingClientRect();
      return [r.left, r.top, r.right, r.bottom]; }) }; })()"""


def axis_place(axis, value):
    """Where an axis's ticks put a CSV value: by interpolation between its first and last tick
    (in log10 on a log axis), a category's own tick, or the not-solved place."""
    if axis["name"] == "solved_at_step" and value == "-1":
        return axis["out"]
    ticks = axis["ticks"]
    if axis["scale"] == "category":
        return dict(ticks).get(value)
    f = math.log10 if axis["scale"] == "log" else float
    (a, ya), (c, yc) = ticks[0], ticks[-1]
    return ya + (f(float(value)) - f(float(a))) / (f(float(c)) - f(float(a))) * (yc - ya)


def check_parallel(b, table, artifacts):
    """A line per summary.csv row through every axis at its CSV value; hover names the run."""
    got = js(b, PARALLEL)
    check(got is not None, "no parallel coordinates")
    if not got:
        return
    shoot(b, artifacts, "sweep_parallel")
    names = [a["name"] for a in got["axes"]]
    check({"lr", "seed", "heldout_exact", "solved_at_step"} <= set(names), f"parallel axes {names}")
    check(sorted(line["run"] for line in got["lines"]) == sorted(row["run"] for row in table),
          f"parallel lines of {[line['run'] for line in got['lines']]}, summary.csv rows {[r['run'] for r in table]}")
    rows = {row["run"]: row for row in table}
    for line in got["lines"]:
        want = [(a["x"], axis_place(a, rows[line["run"]][a["name"]])) for a in got["axes"]]
        ok = len(want) == len(line["points"]) and all(
            w[1] is not None and abs(p[0] - w[0]) < 0.01 and abs(p[1] - w[1]) < 0.5 for p, w in zip(line["points"], want))
        check(ok, f"parallel line of {line['run']}: {line['points']}, its CSV values are at {want}")
    check(not overlapping(got["labels"]), f"parallel labels overlap {overlapping(got['labels'])[:2]}")
    check_parallel_hover(b, got["lines"])


# In the page: a point of the line of `run` that the pointer would reach (nothing above it there).
LINE_SPOT = """((run) => { const l = [...document.querySelectorAll('polyline.pc-line')].find((x) => x.dataset.point === run);
  const m = l.getScreenCTM(), pts = l.getAttribute('points').split(' ').map((p) => p.split(',').map(Number));
  for (let k = 0; k + 1 < pts.length; ++k) for (let f = 0.1; f < 1; f += 0.1) {
    const [a, c] = [pts[k], pts[k + 1]];
    const p = new DOMPoint(a[0] + f * (c[0] - a[0]), a[1] + f * (c[1] - a[1])).matrixTransform(m);
    if (document.elementFromPoint(p.x, p.y) === l) return [p.x, p.y];
  }
  return null; })"""


def check_parallel_hover(b, lines):
    for line in lines:
        spot = js(b, f"{LINE_SPOT}({json.dumps(line['run'])})")
        check(spot is not None, f"parallel line of {line['run']}: nowhere the pointer reaches it")
        if spot:
            b.move_mouse(*spot)
            tip = b.evaluate(base.TIP)
            check(tip is not None and tip.split("\n")[0] == line["run"], f"parallel line of {line['run']}: tip {tip!r}")


def check_sweep(browser, exe, tmp, artifacts):
    """A sweep over lr (a log setting) x seed: two points at each lr; one lr solves copy in 40
    steps and the other does not (if the runs differ from that, the CSV is made to hold both)."""
    out = os.path.join(tmp, "sweep")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "tools", "sweep.py")
    r = subprocess.run([sys.executable, script, "--out", out, "--attnlab", exe, "--grid", "lr=1e-3,1e-2",
                        "--grid", "seed=0,1", "--", "--task", "copy", *TINY[:4], *TINY[6:]], capture_output=True, text=True)
    check(r.returncode == 0, f"sweep.py failed: {r.stdout[-500:]}{r.stderr[-500:]}")
    path = os.path.join(out, "summary.csv")
    table = read_csv(path)
    solved = {row["solved_at_step"] == "-1" for row in table}
    if solved != {True, False}:
        table[0]["solved_at_step"], table[-1]["solved_at_step"] = "-1", "20"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(table)
    page = os.path.join(tmp, "sweep.html")
    attnlab(exe, "report", out, "--out", page)
    b = load_page(browser, page, 1000)
    try:
        shoot(b, artifacts, "sweep_top")
        check_scatters(b, table, artifacts)
        check_sorting(b, table)
        check_parallel(b, table, artifacts)
    finally:
        b.close()


def checks(args, browser, tmp):
    runs = {name: os.path.join(tmp, name) for name in ("one/rev", "two/rev", "three/copy")}
    attnlab(args.attnlab, "train", "--task", "reverse", *PROBED, "--run", runs["one/rev"])
    attnlab(args.attnlab, "train", "--task", "reverse", *with_flag(PROBED, "--layers", "1"), "--lr", "3e-3",
            "--run", runs["two/rev"])
    attnlab(args.attnlab, "train", "--task", "copy", *PROBED, "--run", runs["three/copy"])
    check_pair(browser, args.attnlab, [runs["one/rev"], runs["two/rev"]], tmp, args.artifacts)
    check_tasks_differ(browser, args.attnlab, [runs["one/rev"], runs["three/copy"]], tmp, args.artifacts)
    check_sweep(browser, args.attnlab, tmp, args.artifacts)


def main():
    return base.browser_test("test_report_comparison", checks)


if __name__ == "__main__":
    sys.exit(main())
