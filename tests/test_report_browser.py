#!/usr/bin/env python3
"""`attnlab report` pages loaded in a real browser (a ctest test; needs chromium, else skipped).

Trains tiny runs (encoder, decoder, seq2seq, a text language model; probed with
--probe-every and unprobed), writes a report of each and a comparison of two,
loads each in headless Chromium (driven over its DevTools pipe: tests/chromium_pipe.py)
and checks, in the page:
  - no console error, no uncaught exception (the browser's events, its log and the page's
    #self-check list none), no request but the page's own (the page runs with every
    host name unresolvable and its Content-Security-Policy would refuse a fetch; no
    http(s):// or // in any src or href);
  - each gradient heat map (a canvas) has a cell per weight matrix x probed step of
    probe_params.csv, its smallest and largest values at the colour scale's ends, and the
    pointer moved over a cell shows that cell's matrix, step and CSV value;
  - once every part the page builds when scrolled to (the attention maps) has been scrolled
    into view: one attention map per layer x head x example (3 held-out examples and one
    --input), layers and heads counted from the run's config.ini;
  - one loss curve point per metrics.csv row, each point's value the CSV's text,
    and the held-out exact-match points the CSV's non-empty held-out values;
  - the summary figures shown equal summary.json's;
  - the --input's maps equal `attnlab attention`'s CSV maps for that input;
  - weight matrices whose gradient norm is made far from the rest's are marked;
  - a sweep directory's scatter holds one point per sweep point, linked to its run; so does a
    scripts/tools/tune.py study's, against its objective.
Keeps a screenshot of each page's top under --artifacts. Prints each page's size and load
times (the page's own, from navigation start, and the wall time from starting Chromium);
asserts none.

Exit 0: passed; 1: failed; 77: no chromium on PATH (ctest: skipped).
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser

from chromium_pipe import Browser
from report_layout import layout_problems

SKIP = 77
TINY = ["--d-model", "16", "--heads", "2", "--layers", "2", "--d-ff", "32", "--steps", "40", "--log-every", "5",
        "--eval-every", "20", "--threads", "1", "--quiet"]
FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print("FAIL:", what)


class Dom(HTMLParser):
    """The elements of the dumped DOM: (tag, attributes, text) in document order."""

    def __init__(self):
        super().__init__()
        self.elements, self.open = [], []

    def handle_starttag(self, tag, attrs):
        node = [tag, dict(attrs), ""]
        self.elements.append(node)
        if tag not in ("circle", "rect", "line", "polyline", "meta", "br", "i", "img", "input"):
            self.open.append(node)

    def handle_endtag(self, tag):
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        for node in self.open:
            node[2] += data

    def find(self, tag=None, **attrs):
        return [e for e in self.elements if (tag is None or e[0] == tag)
                and all(e[1].get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items())]


def browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def attnlab(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"attnlab {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def layer_heads(run):
    cfg = {}
    for line in open(os.path.join(run, "config.ini")):
        if "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            cfg[k] = v
    per_stack = int(cfg["layers"]) * int(cfg["heads"])
    # seq2seq: encoder self-attention, decoder self- and cross-attention per layer.
    return 3 * per_stack if cfg["model"] == "seq2seq" else per_stack


def check_run_in_dom(dom, ri, run, exe, run_input):
    name = os.path.basename(run)
    rows = read_csv(os.path.join(run, "metrics.csv"))
    points = dom.find("circle", data_run=str(ri), data_col="loss")
    loss = [e[1]["data-value"] for e in points]
    check(loss == [r["loss"] for r in rows], f"{name}: loss points are metrics.csv's loss column ({len(loss)} vs {len(rows)})")
    tips = [e[1]["data-tip"] for e in points]
    check(all(t.split("\n")[0].endswith(" loss") for t in tips)
          and [t.split("\n", 1)[-1] for t in tips] == [f"step {r['step']}: {r['loss']}" for r in rows],
          f"{name}: loss points' tips {tips[:2]}... are not metrics.csv's steps and values")
    held = [e[1]["data-value"] for e in dom.find("circle", data_run=str(ri), data_col="heldout_exact")]
    lm = "task = text\n" in open(os.path.join(run, "config.ini")).read()  # no exact match for a language model
    check(held == ([] if lm else [r["heldout_exact"] for r in rows if r["heldout_exact"] != ""]), f"{name}: held-out points")
    summary = json.load(open(os.path.join(run, "summary.json")))
    marked = [e for e in dom.find("span", data_run=str(ri)) if "data-summary" in e[1]]
    shown = {e[1]["data-summary"]: e[1].get("data-value") for e in marked}  # the raw value; the text is in words
    check(len(shown) == len(marked), f"{name}: a summary figure is shown twice at a glance")
    for key, value in summary.items():
        ok = key in shown and (float(shown[key]) == value if isinstance(value, (int, float)) else shown[key] == str(value))
        check(ok, f"{name}: summary {key}'s data-value {shown.get(key)!r}, summary.json has {value!r}")
    if os.path.exists(os.path.join(run, "probe_params.csv")):
        check_largest_gradient(dom, ri, run)
    maps = dom.find("canvas", class_="attn-map", data_run=str(ri))
    examples = 3 + (run_input is not None)  # three held-out examples and the --input
    check(len(maps) == examples * layer_heads(run),
          f"{name}: {len(maps)} attention maps, expected {examples} x {layer_heads(run)}")
    unnamed = [e[1]["data-layer"] for e in dom.find("div", class_="maps layer-row", data_run=str(ri))
               if e[2] != e[1]["data-layer"]]  # a row's text: its layer's name, nothing else
    check(not unnamed, f"{name}: attention rows of {unnamed[:3]} do not show their layer's name")
    if run_input is not None:
        check_input_maps(dom, ri, run, exe, run_input)


def check_largest_gradient(dom, ri, run):
    """The gradient section names the parameter with the largest grad_norm at the last probe."""
    rows = read_csv(os.path.join(run, "probe_params.csv"))
    last = [r for r in rows if r["step"] == rows[-1]["step"]]
    top = max(last, key=lambda r: float(r["grad_norm"]))
    shown = [(e[1]["data-largest"], e[1]["data-value"], e[2]) for e in dom.find("p", data_run=str(ri))
             if "data-largest" in e[1]]
    check(len(shown) == 1 and shown[0][:2] == (top["param"], top["grad_norm"]) and top["param"] in shown[0][2],
          f"{os.path.basename(run)}: the largest gradient shown {shown}, probe_params.csv's at step "
          f"{top['step']}: {top['param']} {top['grad_norm']}")


def check_input_maps(dom, ri, run, exe, run_input):
    """The --input's maps (example 3) hold `attnlab attention`'s weights for it."""
    out = run + ".maps"
    attnlab(exe, "attention", "--run", run, "--out", out, run_input)
    meta = json.load(open(os.path.join(out, "attention.json")))
    for layer in meta["layers"]:
        for head, file in enumerate(layer["files"]):
            want = [float(v) for line in open(os.path.join(out, file)) for v in line.strip().split(",")]
            cells = maps_cells(dom, ri, "3", layer["name"], head)
            got = [float(c) for c in cells]
            # The page holds 16-bit weights: round(w * 65535) / 65535, at most 7.7e-6 from w.
            ok = len(got) == len(want) and all(abs(a - b) <= 1e-5 for a, b in zip(got, want))
            check(ok, f"{os.path.basename(run)}: map {layer['name']} head {head} of the --input equals attention's CSV")


def maps_cells(dom, ri, example, layer, head):
    """The weights the page drew for one head's map (its canvas's data-w), row by row."""
    for e in dom.find("canvas", class_="attn-map", data_run=str(ri), data_example=example, data_layer=layer,
                      data_head=str(head)):
        scale = float(e[1]["data-scale"])
        return [int(v) / scale for row in e[1]["data-w"].split(";") for v in row.split(",")]
    return []


# In the page: each of `nodes` still waiting to be built (data-built="no") scrolled into view, one
# by one, waiting up to 60 frames (1 s) for it to be built; resolves to the number of nodes left unbuilt.
SCROLL_TO_BUILD = """(async () => {
  const frame = () => new Promise((done) => requestAnimationFrame(done));
  for (const node of NODES) {
    node.scrollIntoView({ block: "center" });
    for (let k = 0; k < 60 && node.getAttribute("data-built") === "no"; ++k) await frame();
  }
  window.scrollTo(0, 0);
  return document.querySelectorAll('[data-built="no"]').length;
})()"""
UNBUILT = """document.querySelectorAll('[data-built="no"]').length"""
BUILD_ALL = SCROLL_TO_BUILD.replace("NODES", """document.querySelectorAll('[data-built="no"]')""")
BUILD_FIRST = SCROLL_TO_BUILD.replace("NODES", """[document.querySelector('[data-built="no"]')].filter(Boolean)""")
# The times the page measured itself, in ms from its navigation's start.
PAGE_TIMES = """JSON.stringify({ drawn: performance.getEntriesByName("report-drawn")[0]?.startTime ?? -1000,
  load: performance.getEntriesByType("navigation")[0].loadEventEnd, frame: performance.now() })"""


def load_page(exe_browser, page, height=2400):
    """The page opened in a fresh headless Chromium, 1280 x height; prints its size and times."""
    b = Browser(exe_browser, page + ".profile", height=height)
    started = time.monotonic() - b.started
    b.open("file://" + page)
    wall = time.monotonic() - b.started
    t = json.loads(b.evaluate(PAGE_TIMES))
    print(f"{os.path.basename(page)}: {os.path.getsize(page)} bytes; the page's own time from navigation start: "
          f"script done {t['drawn'] / 1e3:.2f} s, load event {t['load'] / 1e3:.2f} s, first frame after load "
          f"{t['frame'] / 1e3:.2f} s; wall time from starting Chromium to that frame {wall:.2f} s "
          f"(Chromium's start to an empty page {started:.2f} s)")
    return b


def check_page(exe_browser, page, runs, exe, inputs, artifacts, printed=False):
    """The page's checks; printed: opened in a 1280 x 700 window (so that parts wait to be built),
    once part of it is built, printed (to PDF), which must build the rest, each part once."""
    b = load_page(exe_browser, page, 700 if printed else 2400)
    try:
        shot = os.path.join(artifacts, os.path.basename(page).replace(".html", ".png"))
        b.screenshot(shot)  # the top of the page as it opens
        check(os.path.exists(shot), f"{page}: no screenshot {shot}")
        check(b.evaluate('document.body.getAttribute("data-rendered")') == "ok",
              f"{page}: the page did not render (data-rendered)")
        if printed:
            waiting = b.evaluate(UNBUILT)
            left = b.evaluate(BUILD_FIRST)
            check(0 < left < waiting, f"{page}: {waiting} parts waiting, {left} once the first is scrolled into view")
            b.call("Page.printToPDF")
            check(b.evaluate(UNBUILT) == 0,
                  f"{page}: parts of the page not built for printing")
        check(b.evaluate(BUILD_ALL) == 0, f"{page}: parts of the page not built when scrolled into view")
        for ri, run in enumerate(runs):  # now that nothing above them changes height
            if os.path.exists(os.path.join(run, "probe_params.csv")):
                for key in ("grad_norm", "update_ratio"):
                    check_heatmap(b, page, ri, run, key)
            if os.path.exists(os.path.join(run, "probe_heads.csv")):
                check_entropy(b, page, ri, run)
        for problem in layout_problems(b, 700 if printed else 2400):  # tests/report_layout.py
            check(False, f"{os.path.basename(page)}: {problem}")
        html = b.evaluate("document.documentElement.outerHTML")
        errors = [t for t in b.console if t[0] in ("error", "assert")] + b.exceptions + [e for e in b.log if e[0] == "error"]
        check(not errors, f"{page}: console errors or exceptions {errors[:5]}")
        url = "file://" + page
        check(all(r == url for r in b.requests),
              f"{page}: requests other than the page: {[r for r in b.requests if r != url][:5]}")
    finally:
        log = b.close()
    for bad in ("Uncaught", "Refused to", "ERR_NAME_NOT_RESOLVED", "net::ERR"):
        check(bad not in log, f"{page}: the browser log has {bad!r}: " +
              "".join(line for line in log.splitlines(True) if bad in line)[:1000])
    check(not [line for line in log.splitlines() if ":CONSOLE" in line and "rror" in line], f"{page}: console errors")
    dom = Dom()
    dom.feed(html)
    pre = dom.find("pre", id="self-check")
    self_check = json.loads(pre[0][2]) if pre and pre[0][2] else {"errors": ["no self-check"]}
    check(self_check["errors"] == [], f"{page}: script errors {self_check['errors']}")
    ids = {e[1]["id"] for e in dom.elements if "id" in e[1]}
    for e in dom.elements:
        for key in ("src", "href"):
            v = e[1].get(key, "")
            check(not (v.startswith("http:") or v.startswith("https:") or v.startswith("//")), f"{page}: {key}={v}")
            check(not v.startswith("#") or v[1:] in ids, f"{page}: a link to {v}, which the page does not have")
    for ri, run in enumerate(runs):
        check_run_in_dom(dom, ri, run, exe, inputs.get(run))
    return dom, self_check


def is_weight_matrix(param):
    return param.endswith("weight") and ".ln" not in param and not param.startswith("ln")


# In the page: a heat map's cell canvas scrolled into view; its box in the viewport, its size in
# cells, how many cells it drew (opaque pixels) and the colour of the cells asked for.
HEAT_CANVAS = """((ri, key, asked) => {
  const c = document.querySelector(`canvas.heat-cells[data-run="${ri}"][data-key="${key}"]`);
  if (!c) return null;
  c.scrollIntoView({ block: "center" });
  const box = c.getBoundingClientRect(), d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let drawn = 0;
  for (let k = 3; k < d.length; k += 4) drawn += d[k] === 255;
  const frame = c.parentElement.getBoundingClientRect(), bar = c.parentElement.nextElementSibling;
  const scale = bar ? [...bar.querySelectorAll("text")].map((t) => t.textContent) : [];
  const inside = frame.left <= box.left && box.right <= frame.right && frame.top <= box.top && box.bottom <= frame.bottom;
  return { left: box.left, top: box.top, width: box.width, height: box.height, columns: c.width, rows: c.height,
           drawn, inside, scale,
           colours: asked.map(([r, col]) => [...d.subarray(4 * (r * c.width + col), 4 * (r * c.width + col) + 3)]) };
})"""
TIP = ('new Promise((done) => requestAnimationFrame(() => { const t = document.getElementById("tip"); '
       'done(t.hidden ? null : t.textContent); }))')
VIRIDIS_ENDS = ([68, 1, 84], [253, 231, 37])  # charts.js's VIRIDIS: the colours of the smallest and largest value


# In the page: an entropy chart scrolled into view; each curve's points in viewport coordinates.
ENTROPY_CURVES = """((ri, layer) => {
  const box = [...document.querySelectorAll(`#gradients-${ri} svg.chart`)].find((c) => c.dataset.chart === "entropy " + layer);
  if (!box) return null;
  box.scrollIntoView({ block: "center" });
  const m = box.getScreenCTM();
  return [...box.querySelectorAll("polyline")].map((line) => line.getAttribute("points").split(" ").filter(Boolean)
    .map((xy) => { const p = new DOMPoint(...xy.split(",").map(Number)).matrixTransform(m); return [p.x, p.y]; }));
})"""


def check_entropy(b, page, ri, run):
    """Each layer's head-entropy chart has a curve per head with a point per probe_heads.csv row
    (finite entropy); the pointer on a point shows its head, step and the CSV's value."""
    rows = [r for r in read_csv(os.path.join(run, "probe_heads.csv")) if finite(r["entropy"])]
    for layer in dict.fromkeys(r["layer"] for r in rows):
        heads = {}
        for r in rows:
            if r["layer"] == layer:
                heads.setdefault(r["head"], []).append(r)
        curves = b.evaluate(f"{ENTROPY_CURVES}({ri}, {json.dumps(layer)})")
        what = f"{os.path.basename(page)} run {ri} {layer} entropy chart"
        check(curves is not None and [len(c) for c in curves] == [len(h) for h in heads.values()],
              f"{what}: points per curve {curves and [len(c) for c in curves]}, probe_heads.csv rows per head "
              f"{[len(h) for h in heads.values()]}")
        if curves is None:
            continue
        everywhere = [p for c in curves for p in c]
        hovered = 0
        for curve, (head, hrows) in zip(curves, heads.items()):
            for k in sorted({0, len(curve) // 2, len(curve) - 1}):
                x, y = curve[k]
                px, py = int(x), int(y)  # the pointer lands on whole pixels (Chromium truncates)
                mine = (px - x) ** 2 + (py - y) ** 2
                if sum((x - u) ** 2 + (y - v) ** 2 < 4 or (px - u) ** 2 + (py - v) ** 2 <= mine
                       for u, v in everywhere) > 1:
                    continue  # another point within 2 px, or as near the pointer: the one shown may be either
                b.move_mouse(px, py)
                want = f"{layer} head {head}\nstep {hrows[k]['step']}: {hrows[k]['entropy']}"
                tip = b.evaluate(TIP)
                check(tip == want, f"{what}: the pointer on a point shows {tip!r}, expected {want!r}")
                hovered += 1
        check(hovered > 0, f"{what}: no point apart from the others to hover")


def fmt(v):
    """core.js's fmt: 3 significant digits, or 1 decimal in exponent form outside [1e-3, 1e4)."""
    if abs(v) >= 1e4 or (v != 0 and abs(v) < 1e-3):
        return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{v:.1e}")
    r = float(f"{v:.3g}")
    return str(int(r)) if r == int(r) else repr(r)


def finite(text):
    try:
        return abs(float(text)) < float("inf")
    except ValueError:
        return False


def check_heatmap(b, page, ri, run, key):
    """probe_params.csv's heat map of `key`: a cell per weight matrix (rows, in the CSV's order) and
    probed step (columns); the pointer over a cell shows the matrix, the step and the CSV's value;
    the smallest and largest values have the colour scale's two ends."""
    rows = read_csv(os.path.join(run, "probe_params.csv"))
    steps = list(dict.fromkeys(r["step"] for r in rows))
    weights = [r for r in rows if is_weight_matrix(r["param"])]
    names = list(dict.fromkeys(r["param"] for r in weights))
    value = {(names.index(r["param"]), steps.index(r["step"])): r[key] for r in weights}
    positive = sorted((float(v), cell) for cell, v in value.items() if 0 < float(v) < float("inf"))
    ends = [positive[0][1], positive[-1][1]]
    got = b.evaluate(f"{HEAT_CANVAS}({ri}, {json.dumps(key)}, {json.dumps(ends)})")
    what = f"{os.path.basename(page)} run {ri} {key} heat map"
    check(got is not None, f"{what}: no canvas")
    if got is None:
        return
    check((got["rows"], got["columns"], got["drawn"]) == (len(names), len(steps), len(value)),
          f"{what}: {got['rows']} x {got['columns']} cells, {got['drawn']} drawn; probe_params.csv has "
          f"{len(names)} weight matrices x {len(steps)} steps, {len(value)} values")
    check(got["colours"] == list(VIRIDIS_ENDS), f"{what}: smallest and largest values coloured {got['colours']}")
    check(got["inside"], f"{what}: the cells overflow the chart's frame")
    want = [fmt(positive[0][0]), fmt(positive[-1][0]) + "  " + key + " (log colour)"]
    check(got["scale"][:2] == want, f"{what}: colour scale labelled {got['scale']}, expected {want} at its ends")
    cw, ch = got["width"] / len(steps), got["height"] / len(names)
    last = (len(names) - 1, len(steps) - 1)
    cells = {(0, 0), last, (len(names) // 2, len(steps) // 3), (1, len(steps) - 2), *ends}
    for r, c in sorted((r, c) for r, c in cells if 0 <= r < len(names) and 0 <= c < len(steps)):
        b.move_mouse(got["left"] + (c + 0.5) * cw, got["top"] + (r + 0.5) * ch)
        want = f"{names[r]}\nstep {steps[c]}: {key} {value[(r, c)]}" if (r, c) in value else None
        tip = b.evaluate(TIP)
        check(tip == want, f"{what}: the pointer over cell ({r}, {c}) shows {tip!r}, expected {want!r}")
    b.move_mouse(got["left"] + got["width"] + 3, got["top"] + 3)  # just right of the cells: no tip
    check(b.evaluate(TIP) is None, f"{what}: a tip beside the cells")


def check_flags(exe_browser, exe, run, self_check, tmp, artifacts):
    """Layers whose gradient norm is far from the rest's are marked: a copy of a probed run
    with one weight's norm made 1e6 times larger, one's zero and one's nan at the last probe
    shows exactly those marked beside the run's own."""
    rows = read_csv(os.path.join(run, "probe_params.csv"))
    last = rows[-1]["step"]
    weights = [r for r in rows if r["step"] == last and is_weight_matrix(r["param"])]
    own = self_check["runs"][0].get("flagged", {})
    chosen = [w for w in weights if w["param"] not in own][:3]
    check(len(chosen) == 3, f"{run}: three unflagged weight matrices to doctor")
    changes = dict(zip((w["param"] for w in chosen), (lambda g: str(float(g) * 1e6), lambda g: "0", lambda g: "nan")))
    doctored = os.path.join(tmp, "doctored")
    shutil.copytree(run, doctored)
    with open(os.path.join(doctored, "probe_params.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
        w.writeheader()
        for r in rows:
            if r["step"] == last and r["param"] in changes:
                r = dict(r, grad_norm=changes[r["param"]](r["grad_norm"]))
            w.writerow(r)
    page = os.path.join(tmp, "doctored.html")
    attnlab(exe, "report", doctored, "--out", page)
    dom, check2 = check_page(exe_browser, page, [doctored], exe, {}, artifacts)
    flagged = {p: f["kind"] for p, f in check2["runs"][0]["flagged"].items()}
    marks = {e[2] for e in dom.find("text", class_="flag")}  # each heat map names each flagged matrix
    want_marks = {("\u25bc " if kind == "vanishing" else "\u25b2 ") + p for p, kind in flagged.items()}
    check(marks == want_marks, f"flag marks {sorted(marks)}, expected {sorted(want_marks)} (\u25b2 exploding or not finite)")
    want = dict({p: f["kind"] for p, f in own.items()},
                **dict(zip(changes, ("exploding", "vanishing", "not finite"))))
    check(flagged == want, f"flagged layers {flagged}, expected {want}")


def check_sweep(exe_browser, exe, tmp, artifacts):
    """A scripts/tools/sweep.py directory: its table, and each setting against held-out exact match,
    one point per sweep point holding summary.csv's value and linking to that point's run."""
    out = os.path.join(tmp, "sweep")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "tools", "sweep.py")
    r = subprocess.run([sys.executable, script, "--out", out, "--attnlab", exe, "--grid", "lr=1e-3,3e-3",
                        "--grid", "layers=1,2", "--", "--task", "copy", *TINY[:4], *TINY[6:]],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"sweep.py failed: {r.stdout[-500:]}{r.stderr[-500:]}")
    table = read_csv(os.path.join(out, "summary.csv"))
    page = os.path.join(tmp, "sweep.html")
    attnlab(exe, "report", out, "--out", page)
    runs = [os.path.join(out, row["run"]) for row in sorted(table, key=lambda row: row["run"])]
    dom, _ = check_page(exe_browser, page, runs, exe, {}, artifacts)
    check_scatter(dom, table, ("lr", "layers"), "heldout_exact")


def check_tune_study(exe_browser, exe, tmp, artifacts):
    """A scripts/tools/tune.py study directory is a sweep to the report: each parameter against the
    objective (the outcome shown first), one point per complete trial, linking to its run."""
    out = os.path.join(tmp, "tune")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "tools", "tune.py")
    r = subprocess.run([sys.executable, script, "--out", out, "--attnlab", exe, "--param", "lr=cat:0.001,0.003",
                        "--param", "layers=cat:1,2", "--sampler", "grid", "--pruner", "none", "--trials", "4", "--",
                        "--task", "copy", *TINY[:4], *TINY[6:]], capture_output=True, text=True)
    if r.returncode == 77 or "No module named 'optuna'" in r.stderr:
        print("skip  tune study page: optuna cannot be imported")
        return
    check(r.returncode == 0, f"tune.py failed: {r.stdout[-500:]}{r.stderr[-500:]}")
    table = read_csv(os.path.join(out, "summary.csv"))
    page = os.path.join(tmp, "tune.html")
    attnlab(exe, "report", out, "--out", page)
    runs = [os.path.join(out, row["run"]) for row in sorted(table, key=lambda row: row["run"])]
    dom, _ = check_page(exe_browser, page, runs, exe, {}, artifacts)
    check_scatter(dom, table, ("lr", "layers"), "objective")


def check_scatter(dom, table, params, outcome):
    """The sweep table has a row per point, and each parameter's scatter holds one point per
    point with summary.csv's value of `outcome`, linking to that point's run section."""
    check(len(dom.find("tr")) - 1 >= len(table), "a sweep table row per point")
    els = dom.elements
    names = {e[1]["id"]: els[i + 1][2].replace("Run ", "", 1) for i, e in enumerate(els)
             if e[0] == "section" and e[1].get("id", "").startswith("run-")}
    want = {row["run"]: row[outcome] for row in table if row[outcome] != ""}
    drawn = {e[1]["data-param"] for e in els if e[0] == "circle" and "data-param" in e[1]}
    check(drawn == set(params), f"scatters of exactly the settings {sorted(params)}, not of outcomes: {sorted(drawn)}")
    for param in params:
        got = {}
        for i, e in enumerate(els):
            if e[0] == "circle" and e[1].get("data-param") == param:
                link = els[i - 1][1].get("href", "") if els[i - 1][0] == "a" else ""
                got[names.get(link[1:], "")] = e[1]["data-value"]
        check(got == want, f"sweep scatter of {param} against {outcome}: {got}, summary.csv: {want}")


def check_refusals(exe, run, tmp):
    """A malformed or partial run: one line on stderr, exit 2, no file."""
    broken = os.path.join(tmp, "broken")
    shutil.copytree(run, broken)
    with open(os.path.join(broken, "metrics.csv"), "a") as f:
        f.write("1,2\n")
    for target, why in ((broken, "malformed metrics.csv"), (os.path.join(tmp, "missing"), "no directory")):
        page = os.path.join(tmp, "refused.html")
        r = subprocess.run([exe, "report", target, "--out", page], capture_output=True, text=True)
        lines = [line for line in r.stderr.splitlines() if not line.startswith("note:")]
        check(r.returncode == 2 and len(lines) == 1 and not os.path.exists(page),
              f"report of a run with {why}: exit {r.returncode}, stderr {r.stderr!r}")
    page = os.path.join(tmp, "user.html")
    open(page, "w").write("a user's page\n")
    r = subprocess.run([exe, "report", run, "--out", page], capture_output=True, text=True)
    check(r.returncode == 2 and open(page).read() == "a user's page\n", "a user's file is replaced without --overwrite")


def train_runs(exe, tmp):
    with open(os.path.join(tmp, "corpus.txt"), "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 60)
    specs = {"encoder": ["--task", "copy", "--model", "encoder", "--probe-every", "10", "--heldout", "50"],
             "decoder": ["--task", "reverse", "--model", "decoder", "--heldout", "50"],
             "seq2seq": ["--task", "reverse", "--model", "seq2seq", "--probe-every", "10", "--heldout", "50"],
             "textlm": ["--task", "text", "--file", os.path.join(tmp, "corpus.txt"), "--seq-len", "16",
                        "--model", "decoder", "--probe-every", "10"]}
    runs = {}
    for name, flags in specs.items():
        runs[name] = os.path.join(tmp, name)
        attnlab(exe, "train", *flags, *TINY, "--run", runs[name])
    return runs


# The benchmark's L shape (docs/benchmark.md: d 256, 8 heads, 6 layers, d_ff 1024, V 64, T 64).
L_SHAPE = ["--d-model", "256", "--heads", "8", "--layers", "6", "--d-ff", "1024", "--vocab", "64",
           "--min-len", "64", "--max-len", "64"]


def check_scale(exe_browser, exe, tmp, artifacts):
    """The page of an L-sized run probed every 10 steps over 2,000 steps (one sequence per
    step keeps the training short; the page's size does not depend on the batch): its size
    and the time the browser takes to load and render it, printed, not asserted."""
    run = os.path.join(tmp, "L")
    attnlab(exe, "train", "--task", "reverse", *L_SHAPE, "--batch", "1", "--steps", "2000", "--probe-every", "10",
            "--target", "0", "--heldout", "20", "--threads", "1", "--quiet", "--run", run)
    page = os.path.join(tmp, "L.html")
    attnlab(exe, "report", run, "--out", page)
    print(f"L-sized run, probes every 10 steps over 2,000 steps: report {os.path.getsize(page) / 1e6:.2f} MB")
    check_page(exe_browser, page, [run], exe, {}, artifacts)


def browser_test(name, checks, options=()):
    """What every browser test's main does around its checks: --attnlab and --artifacts parsed (and
    `options`, pairs of a flag and add_argument's keywords); 77 (skipped) without chromium;
    checks(args, exe_browser, tmp) run with a temporary directory that is removed after them; one line
    naming the test and its failures (FAILURES, shared by every test that imports this module); the
    exit code."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnlab", required=True)
    ap.add_argument("--artifacts", required=True)
    for flag, keywords in options:
        ap.add_argument(flag, **keywords)
    args = ap.parse_args()
    exe_browser = browser()
    if not exe_browser:
        print(f"{name}: SKIPPED: no chromium on PATH (scripts/install-deps.sh installs it)")
        return SKIP
    os.makedirs(args.artifacts, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f"attnlab-{name}-")
    try:
        checks(args, exe_browser, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{name}: {'FAILED' if FAILURES else 'passed'} ({len(FAILURES)} failures)")
    return 1 if FAILURES else 0


def checks(args, exe_browser, tmp):
    if args.scale:
        check_scale(exe_browser, args.attnlab, tmp, args.artifacts)
        return
    runs = train_runs(args.attnlab, tmp)
    inputs = {runs["encoder"]: "1 2 3 4", runs["decoder"]: "3 1 4 1", runs["seq2seq"]: "2 7 1 8",
              runs["textlm"]: "the lazy "}
    checked = {}
    for name, run in runs.items():
        page = os.path.join(tmp, name + ".html")
        # The encoder's page also patches a pair (the sanitizer build runs no other test of that data).
        pair = ["--clean", "1 2 3 4", "--corrupt", "1 2 5 4"] if name == "encoder" else []
        attnlab(args.attnlab, "report", run, "--input", inputs[run], *pair, "--out", page)
        _, checked[name] = check_page(exe_browser, page, [run], args.attnlab, inputs, args.artifacts,
                                      printed=name == "seq2seq")
    page = os.path.join(tmp, "comparison.html")
    pair = [runs["decoder"], runs["seq2seq"]]
    attnlab(args.attnlab, "report", *pair, "--input", "3 1 4 1", "--out", page)
    check_page(exe_browser, page, pair, args.attnlab, {run: "3 1 4 1" for run in pair}, args.artifacts)
    check_flags(exe_browser, args.attnlab, runs["encoder"], checked["encoder"], tmp, args.artifacts)
    check_sweep(exe_browser, args.attnlab, tmp, args.artifacts)
    check_tune_study(exe_browser, args.attnlab, tmp, args.artifacts)
    check_refusals(args.attnlab, runs["decoder"], tmp)


def main():
    return browser_test("test_report_browser", checks,
                        [("--scale", {"action": "store_true", "help": "only the L-sized run's page (check_scale)"})])


if __name__ == "__main__":
    sys.exit(main())
