#!/usr/bin/env python3
"""The report's mechanisms section against probe_induction.csv and embedding_fourier.csv, in headless
Chromium (a ctest test; needs chromium, else skipped).

Three tiny runs: a two-layer decoder with train --probe-induction (the induction scores), a modular run (its
embedding's Fourier spectrum at each evaluation) and a copy run with neither. On each page:
  - induction: a layer x head grid per score at the last probed step, its cells the CSV's rows of that step
    (layer, head and the CSV's text); per layer and score a chart whose points are the CSV's steps and values,
    a series per head; the sentence naming the head with the highest prefix-matching score at the last step;
  - Fourier: one bar per frequency of the last step, the CSV's norms; the key frequencies named, the five
    largest norms at k >= 1 (ties: the lower k), and their share of the energy at k >= 1; each key
    frequency's share over the evaluations, recomputed here from the CSV;
  - a run with neither has no mechanisms section and no link to one; a page of one run has only the block
    its file gives;
  - the pages pass tests/test_report_browser.py's checks (layout, no console errors, nothing fetched).
Screenshots of the sections go to --artifacts.
"""
import json
import math
import os
import sys

import test_report_browser as trb
from test_report_browser import attnlab, check, load_page, read_csv

SMALL = ["--d-model", "16", "--heads", "2", "--d-ff", "32", "--batch-size", "8", "--threads", "1", "--target", "0",
         "--quiet"]
RUNS = {"induction": ["--task", "reverse", "--model", "decoder", "--vocab", "8", "--min-len", "4", "--max-len", "4",
                      "--layers", "2", "--heldout", "40", "--steps", "12", "--eval-every", "6", "--probe-induction", "3"],
        "modular": ["--task", "modular", "--modulus", "13", "--model", "decoder", "--layers", "1", "--steps", "12",
                    "--eval-every", "4"],
        "plain": ["--task", "copy", "--vocab", "4", "--min-len", "3", "--max-len", "3", "--layers", "1",
                  "--heldout", "20", "--steps", "4", "--log-every", "2", "--eval-every", "2"]}

SECTION = """JSON.stringify({
  section: !!document.getElementById("mechanisms-0"),
  nav: [...document.querySelectorAll("#nav a")].map((a) => a.getAttribute("href")),
  induction: !!document.getElementById("induction-0"), fourier: !!document.getElementById("fourier-0") })"""
INDUCTION = """JSON.stringify({
  grids: [...document.querySelectorAll("#induction-0 svg.induction-grid")].map((g) => ({ col: g.dataset.col,
    step: g.dataset.step, cells: [...g.querySelectorAll("rect.score-cell")].map((c) => [c.dataset.layer,
    c.dataset.head, c.dataset.value]) })),
  charts: [...document.querySelectorAll("#induction-0 svg.chart[data-chart]")].map((box) => ({ key: box.dataset.chart,
    points: [...box.querySelectorAll("circle.pt")].map((c) => [c.dataset.series, c.dataset.col, c.dataset.x,
    c.dataset.value]) })),
  best: (({ layer, head, value }) => ({ layer, head, value }))(
    document.querySelector("#induction-0 p.induction-best").dataset) })"""
FOURIER = """JSON.stringify({
  bars: [...document.querySelectorAll("#fourier-0 svg.spectrum rect.bar")].map((r) => [r.dataset.frequency,
    r.dataset.value]),
  step: document.querySelector("#fourier-0 svg.spectrum").dataset.step,
  key: (({ frequencies, share, step }) => ({ frequencies, share, step }))(
    document.querySelector("#fourier-0 p.key-frequencies").dataset),
  share: [...document.querySelectorAll("#fourier-0 svg.chart[data-chart='fourier share'] circle.pt")].map((c) =>
    [c.dataset.series, c.dataset.x, c.dataset.value]) })"""


def check_induction(rows, got):
    last = rows[-1]["step"]
    steps = list(dict.fromkeys(r["step"] for r in rows))
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    heads = list(dict.fromkeys(r["head"] for r in rows))
    check(steps == ["1", "3", "6", "9", "12"] and layers == ["blocks.0.attn", "blocks.1.attn"] and heads == ["0", "1"],
          f"induction: the CSV's steps {steps}, layers {layers}, heads {heads}")
    cols = ["prefix_matching", "previous_token"]
    check([g["col"] for g in got["grids"]] == cols, f"induction: grids {[g['col'] for g in got['grids']]}")
    for g in got["grids"]:
        want = [[r["layer"], r["head"], r[g["col"]]] for r in rows if r["step"] == last]
        check(g["step"] == last and g["cells"] == want, f"induction {g['col']}: cells {g['cells']} at step {g['step']}, "
              f"the CSV's {want} at step {last}")
    keys = [f"induction {c} {layer}" for layer in layers for c in cols]
    check([c["key"] for c in got["charts"]] == keys, f"induction: charts {[c['key'] for c in got['charts']]}, want {keys}")
    for chart in got["charts"]:
        _, col, layer = chart["key"].split(" ")
        want = [[str(hi), col, r["step"], r[col]] for hi, h in enumerate(heads) for r in rows
                if r["layer"] == layer and r["head"] == h]
        check(chart["points"] == want, f"{chart['key']}: points {chart['points']}, the CSV's {want}")
    at_last = [r for r in rows if r["step"] == last]
    best = max(at_last, key=lambda r: float(r["prefix_matching"]))  # the first of equals, as the page
    check(got["best"] == {"layer": best["layer"], "head": best["head"], "value": best["prefix_matching"]},
          f"induction: the strongest head {got['best']}, the CSV's {best}")


def shares(rows, step):
    norms = {int(r["frequency"]): float(r["norm"]) for r in rows if r["step"] == step}
    energy = sum(v * v for k, v in norms.items() if k > 0)
    return norms, {k: v * v / energy for k, v in norms.items() if k > 0}


def check_fourier(rows, got):
    steps = list(dict.fromkeys(r["step"] for r in rows))
    last = steps[-1]
    check(steps == ["4", "8", "12"], f"fourier: the CSV's steps {steps}")
    want = [[r["frequency"], r["norm"]] for r in rows if r["step"] == last]
    check(got["step"] == last and got["bars"] == want and len(want) == 7,
          f"fourier: bars {got['bars']} at step {got['step']}, the CSV's {want} at {last}")
    norms, share = shares(rows, last)
    top = sorted((k for k in norms if k > 0 and norms[k] > 0), key=lambda k: (-norms[k], k))[:5]
    check(got["key"]["frequencies"] == " ".join(map(str, top)) and got["key"]["step"] == last,
          f"fourier: key frequencies {got['key']}, the CSV's largest {top}")
    check(math.isclose(float(got["key"]["share"]), sum(share[k] for k in top), rel_tol=1e-9),
          f"fourier: their share {got['key']['share']}, the CSV's {sum(share[k] for k in top)}")
    want = [(str(i), s, shares(rows, s)[1][k]) for i, k in enumerate(top) for s in steps]
    ok = len(got["share"]) == len(want) and all(
        g[0] == w[0] and g[1] == w[1] and math.isclose(float(g[2]), w[2], rel_tol=1e-9) for g, w in zip(got["share"], want))
    check(ok, f"fourier: share points {got['share']}, the CSV's {want}")


def checks(args, exe_browser, tmp):
    exe = args.attnlab
    for name, flags in RUNS.items():
        run = os.path.join(tmp, name)
        attnlab(exe, "train", "--run", run, *SMALL, *flags)
        page = os.path.join(tmp, name + ".html")
        attnlab(exe, "report", run, "--out", page)
        trb.check_page(exe_browser, page, [run], exe, {}, args.artifacts)
        b = load_page(exe_browser, page, 1600)
        try:
            b.evaluate(trb.BUILD_ALL)
            shown = json.loads(b.evaluate(SECTION))
            want = {"induction": name == "induction", "fourier": name == "modular"}
            check(shown["section"] == (name != "plain") and ("#mechanisms-0" in shown["nav"]) == (name != "plain"),
                  f"{name}: a mechanisms section {shown['section']}, its link in {shown['nav']}")
            check({k: shown[k] for k in want} == want, f"{name}: blocks shown {shown}")
            if name == "induction":
                check_induction(read_csv(os.path.join(run, "probe_induction.csv")), json.loads(b.evaluate(INDUCTION)))
            if name == "modular":
                check_fourier(read_csv(os.path.join(run, "embedding_fourier.csv")), json.loads(b.evaluate(FOURIER)))
            if name != "plain":
                b.evaluate("document.getElementById('mechanisms-0').scrollIntoView()")
                b.screenshot(os.path.join(args.artifacts, f"mechanisms_{name}.png"))
        finally:
            b.close()


def main():
    return trb.browser_test("test_report_mechanisms", checks)


if __name__ == "__main__":
    sys.exit(main())
