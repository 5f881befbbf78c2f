#!/usr/bin/env python3
"""The report's ablation view against `attnlab ablate --json`, in headless Chromium (a ctest test; needs chromium,
else skipped).

One page of the four tiny runs of tests/test_report_browser.py (encoder, decoder, seq2seq, a character LM). For
each run's "What matters" section:
  - every head cell and every MLP and layer bar holds the change `attnlab ablate --mode zero --heldout N --json`
    prints for that component of the same run (N as the view says; exact match, a language model's loss), and
    its colour is viridis of its share of the largest effect;
  - one row per attention, named and ordered as the attention section's layer rows, its heads left to right on
    one line; hovering a cell shows the tip with the component's figures and the intact ones;
  - the page passes tests/test_report_browser.py's checks (layout, no console errors, nothing fetched).
A screenshot of the first view goes to --artifacts.
"""
import json
import os
import sys

import test_report_browser as trb
from test_report_browser import attnlab, check, load_page

VIEW = """JSON.stringify([...document.querySelectorAll(".ablation-view")].map((v) => ({
  run: +v.dataset.run, title: v.querySelector("h3").textContent,
  rows: [...v.querySelectorAll(".ablation-row")].map((r) => ({ layer: r.dataset.layer,
    cells: [...r.querySelectorAll(".ablation-cell")].map((c) => { const b = c.getBoundingClientRect();
      return { component: c.dataset.component, head: +c.dataset.head, value: +c.dataset.value, tip: c.dataset.tip,
               text: c.textContent, colour: getComputedStyle(c).backgroundColor, x: b.left, y: b.top,
               w: b.width, h: b.height }; }) })),
  bars: [...v.querySelectorAll(".ablation-bar-value")].map((c) => ({ component: c.dataset.component,
    value: +c.dataset.value, tip: c.dataset.tip })) })))"""
ATTENTION_LAYERS = """JSON.stringify([...document.querySelectorAll('div.layer-row[data-run="RI"][data-example="0"]')]
  .map((r) => r.dataset.layer))"""
VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]]


def viridis(t):
    """viridis() of cli/report/charts.js."""
    t = max(0.0, min(1.0, t)) * 4
    i = min(3, int(t))
    f = t - i
    return "rgb(" + ", ".join(str(round(a + (b - a) * f + 1e-12)) for a, b in zip(VIRIDIS[i], VIRIDIS[i + 1])) + ")"


def pct(v):
    return f"{100 * v:.2f}%"


def figures(ref, r):
    exact = "" if ref["language_model"] else f"exact match {pct(r['exact_match'])}, "
    return f"{exact}token accuracy {pct(r['token_accuracy'])}, loss {r['loss']:.4f}"


def check_view(b, exe, run, view, ri):
    name = os.path.basename(run)
    examples = int(view["title"].split(" on ")[1].split()[0])
    ref = json.loads(attnlab(exe, "ablate", "--run", run, "--mode", "zero", "--heldout", str(examples), "--json"))
    check(ref["examples"] == examples, f"{name}: the view says {examples} examples, ablate scored {ref['examples']}")
    lm = ref["language_model"]
    by_name = {r["component"]: r for r in ref["rows"]}
    change = (lambda r: r["delta_loss"]) if lm else (lambda r: r["delta_exact_match"])
    top = max([0] + [(r["delta_loss"] if lm else -r["delta_exact_match"]) for r in ref["rows"]]) or (1 if lm else 0.01)
    seen = set()
    for row in view["rows"]:
        heads = [c["head"] for c in row["cells"]]
        check(heads == sorted(heads) and heads == list(range(len(heads))), f"{name} {row['layer']}: heads {heads}")
        xs, ys = [c["x"] for c in row["cells"]], {round(c["y"]) for c in row["cells"]}
        check(xs == sorted(xs) and len(ys) == 1, f"{name} {row['layer']}: cells not on one line left to right")
        for c in row["cells"]:
            r = by_name.get(c["component"])
            check(r is not None and c["component"] == f"{row['layer']}.h{c['head']}", f"{name}: cell {c['component']}")
            if r is None:
                continue
            seen.add(c["component"])
            check(c["value"] == change(r), f"{name} {c['component']}: cell {c['value']}, ablate {change(r)}")
            text = f"{change(r):+.3f}" if lm else f"{100 * change(r):+.1f}"
            check(c["text"] == (text if change(r) > 0 else text.lstrip("+")), f"{name} {c['component']}: text {c['text']}")
            effect = change(r) if lm else -change(r)
            check(c["colour"] == viridis(effect / top), f"{name} {c['component']}: colour {c['colour']}")
            tip = f"{c['component']} zeroed: {figures(ref, r)} (intact: {figures(ref, ref['intact'])})"
            check(c["tip"] == tip, f"{name} {c['component']}: tip {c['tip']!r}, expected {tip!r}")
    for bar in view["bars"]:
        r = by_name.get(bar["component"])
        check(r is not None and bar["value"] == change(r), f"{name} {bar['component']}: bar {bar['value']}")
        seen.add(bar["component"])
    check(seen == set(by_name), f"{name}: components drawn {sorted(seen)}, ablate has {sorted(by_name)}")
    layers = json.loads(b.evaluate(ATTENTION_LAYERS.replace("RI", str(ri))))
    check([r["layer"] for r in view["rows"]] == layers, f"{name}: rows {[r['layer'] for r in view['rows']]}, "
          f"the attention section's {layers}")


def check_hover(b, view):
    cell = view["rows"][0]["cells"][0]
    b.evaluate(f"window.scrollTo(0, {cell['y']} + window.scrollY - 200)")
    fresh = json.loads(b.evaluate(VIEW))[0]["rows"][0]["cells"][0]
    b.move_mouse(fresh["x"] + fresh["w"] / 2, fresh["y"] + fresh["h"] / 2)
    shown = b.evaluate('document.getElementById("tip").hidden ? "" : document.getElementById("tip").textContent')
    check(shown == cell["tip"], f"hovering {cell['component']} shows {shown!r}")


def checks(args, exe_browser, tmp):
    exe = args.attnlab
    runs = list(trb.train_runs(exe, tmp).values())
    page = os.path.join(tmp, "ablation.html")
    attnlab(exe, "report", *runs, "--out", page)
    trb.check_page(exe_browser, page, runs, exe, {}, args.artifacts)
    b = load_page(exe_browser, page, 1200)
    try:
        b.evaluate(trb.BUILD_ALL)
        views = json.loads(b.evaluate(VIEW))
        check(sorted(v["run"] for v in views) == list(range(len(runs))), f"views of runs {[v['run'] for v in views]}")
        for view in views:
            check_view(b, exe, runs[view["run"]], view, view["run"])
        check_hover(b, views[0])
        b.screenshot(os.path.join(args.artifacts, "ablation_view.png"))
    finally:
        b.close()


def main():
    return trb.browser_test("test_report_ablation", checks)


if __name__ == "__main__":
    sys.exit(main())
