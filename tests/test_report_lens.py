#!/usr/bin/env python3
"""The report's logit lens view (cli/report/lens_view.js) in headless Chromium, against `attnlab lens --json`
(a ctest test; needs chromium, else skipped).

Three runs: a pre-LN decoder (sort), a pre-LN seq2seq (reverse) and a post-LN encoder (reverse), each
reported with an --input. For every example the lens view shows (the held-out ones of the attention
section, then the --input):
  - each cell of the point x position grid holds the top token `attnlab lens --json` gives for the same
    input, its data attributes the probabilities and rank, its shade the right answer's probability,
    and it is marked (lens-right) exactly where the right token ranks first; a hover on a few cells
    shows the point, position, token read, top token and the right answer's probability and rank;
  - the attribution grid holds every head's, attention bias's and MLP's part of the answer's logit at
    the first answer position, and after a click on another answer column that position's; a hover
    names the part; the post-LN run shows the refusal instead.
The page passes the common layout check (check_page). A screenshot of each view goes to --artifacts.
"""
import colorsys
import json
import os
import sys

import test_report_browser as trb
from test_report_browser import TINY, attnlab, check, check_page, load_page

GLYPHS = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"}
SYMBOLS = ["--vocab", "6", "--min-len", "3", "--max-len", "5", "--heldout", "8"]
RUNS = [("dec", ["--task", "sort", "--model", "decoder"], "3 1 2 0"),
        ("s2s", ["--task", "reverse", "--model", "seq2seq"], "0 4 2"),
        ("post", ["--task", "reverse", "--norm", "post"], "5 1 2")]
# In the page: each lens example's header, cells and attribution cells, with their boxes.
VIEW = """JSON.stringify([...document.querySelectorAll(".lens-example")].map((x) => {
  const box = (e) => { const b = e.getBoundingClientRect(); return [(b.left + b.right) / 2, (b.top + b.bottom) / 2]; };
  return { head: x.querySelector("h4").textContent, note: x.querySelector(".lens-dla .note")?.textContent,
    cells: [...x.querySelectorAll(".lens-cell")].map((c) => ({ point: +c.dataset.point, pos: +c.dataset.pos,
      text: c.textContent, top: c.dataset.top, p_top: c.dataset.pTop, p_answer: c.dataset.pAnswer, rank: c.dataset.rank,
      right: c.classList.contains("lens-right"), background: getComputedStyle(c).backgroundColor, at: box(c) })),
    dla: [...x.querySelectorAll(".dla-grid")].map((g) => ({ pos: +g.dataset.pos,
      cells: [...g.querySelectorAll(".dla-cell")].map((c) => ({ component: c.dataset.component,
        logit: +c.dataset.logit, text: c.textContent, at: box(c) })) })) };
}))"""


def glyph(token):
    return "".join(GLYPHS.get(ch, ch) for ch in token)


def shade(p):
    """lens_view.js's cell colour for the right answer's probability p: hsl(140, 55%, 97 - 50p %)."""
    r, g, b = colorsys.hls_to_rgb(140 / 360, round(97 - 50 * p, 1) / 100, 0.55)
    return [round(255 * v) for v in (r, g, b)]


def lens_of(exe, run, text):
    return json.loads(attnlab(exe, "lens", "--run", run, text, "--json"))


def view(b):
    """The lens examples in the page; a position without a right answer has rank and p_answer "null" (None here)."""
    examples = json.loads(b.evaluate(VIEW))
    for c in (c for x in examples for c in x["cells"]):
        c.update({k: None for k in ("rank", "p_answer") if c[k] == "null"})
    return examples


def tip_at(b, at):
    b.move_mouse(*at)
    return b.evaluate("document.getElementById('tip').hidden ? '' : document.getElementById('tip').textContent")


def want_tip(e, p, t):
    c = e["lens"][p][t]
    right = "no right answer here" if c["rank"] is None else \
        f"right {glyph(e['answers'][t])}: p {c['p_answer']:.4f}, rank {c['rank']}"
    return (f"{e['points'][p]}, position {t} (reads {glyph(e['tokens'][t])})\ntop {glyph(c['top'])}: "
            f"p {c['p_top']:.4f}\n{right}")


def check_cells(b, shown, e, what):
    check(len(shown["cells"]) == len(e["points"]) * len(e["tokens"]), f"{what}: {len(shown['cells'])} lens cells")
    for c in shown["cells"]:
        want, where = e["lens"][c["point"]][c["pos"]], f"{what} point {c['point']} position {c['pos']}"
        check(c["text"] == glyph(want["top"]) and c["top"] == want["top"], f"{where}: top {c['text']!r}, lens {want['top']!r}")
        check(abs(float(c["p_top"]) - want["p_top"]) <= 1e-6, f"{where}: p_top {c['p_top']}, lens {want['p_top']}")
        check(c["right"] == (want["rank"] == 1), f"{where}: marked {c['right']}, the answer's rank {want['rank']}")
        if want["rank"] is None:
            check(c["rank"] is None and c["background"] == "rgb(238, 238, 238)", f"{where}: a prompt cell {c}")
            continue
        check(int(c["rank"]) == want["rank"] and abs(float(c["p_answer"]) - want["p_answer"]) <= 1e-6,
              f"{where}: rank {c['rank']} p {c['p_answer']}, lens {want['rank']} {want['p_answer']}")
        got = [int(v) for v in c["background"][4:-1].split(",")]
        check(all(abs(x - y) <= 1 for x, y in zip(got, shade(want["p_answer"]))),
              f"{where}: shade {got}, {shade(want['p_answer'])} for p {want['p_answer']}")
    for c in shown["cells"][::7]:
        got = tip_at(b, c["at"])
        want = want_tip(e, c["point"], c["pos"])
        check(got == want, f"{what}: the tip over point {c['point']} position {c['pos']} is {got!r}, want {want!r}")


def check_attribution(b, shown, e, what):
    grids = shown["dla"]
    check(len(grids) == 1, f"{what}: {len(grids)} attribution grids")
    if not grids:
        return
    at = next(a for a in e["attribution"] if a["position"] == grids[0]["pos"])
    parts = {p["component"]: p["logit"] for p in at["parts"] if p["component"] not in ("embed", "decoder.embed", "constant")}
    got = {c["component"]: c["logit"] for c in grids[0]["cells"]}
    check(sorted(got) == sorted(parts), f"{what}: attribution cells {sorted(got)}, lens parts {sorted(parts)}")
    check(all(abs(got[k] - parts[k]) <= 1e-6 for k in got if k in parts), f"{what}: attribution values differ")
    c = grids[0]["cells"][0]
    want = f"{c['component']} at position {grids[0]['pos']}: {parts.get(c['component'], 0):.4f}"
    check(tip_at(b, c["at"]) == want, f"{what}: the tip over {c['component']} is not {want!r}")


def check_run(exe_browser, exe, tmp, artifacts, name, text):
    run, page = os.path.join(tmp, name), os.path.join(tmp, name + ".html")
    attnlab(exe, "report", run, "--input", text, "--out", page)
    check_page(exe_browser, page, [run], exe, {run: text}, artifacts)
    b = load_page(exe_browser, page, 1400)
    try:
        b.evaluate("document.querySelector('.lens-view').scrollIntoView()")
        b.screenshot(os.path.join(artifacts, f"lens-{name}.png"))
        examples = view(b)
        check(len(examples) == 4 and examples[-1]["head"] == "--input: " + text, f"{name}: lens examples {examples}")
        for ei, shown in enumerate(examples):
            b.evaluate(f"document.querySelectorAll('.lens-example')[{ei}].scrollIntoView()")
            shown = view(b)[ei]
            source, _, input_text = shown["head"].partition(": ")
            e, what = lens_of(exe, run, input_text), f"{name} {shown['head']}"
            check_cells(b, shown, e, what)
            if e["attribution"] is None:
                check(shown["note"] == e["attribution_note"] and not shown["dla"], f"{what}: the refusal is not shown")
                continue
            check_attribution(b, shown, e, what)
            last = next(c for c in reversed(shown["cells"]) if c["rank"] is not None)
            b.move_mouse(*last["at"])
            for kind in ("mousePressed", "mouseReleased"):
                b.call("Input.dispatchMouseEvent", type=kind, x=last["at"][0], y=last["at"][1], button="left", clickCount=1)
            shown = view(b)[ei]
            chosen = shown["dla"] and shown["dla"][0]["pos"] == last["pos"]
            check(chosen, f"{what}: a click did not choose position {last['pos']}")
            check_attribution(b, shown, e, what + " (clicked)")
    finally:
        b.close()


def checks(args, exe_browser, tmp):
    exe = args.attnlab
    for name, flags, text in RUNS:
        attnlab(exe, "train", "--run", os.path.join(tmp, name), *TINY, *SYMBOLS, *flags)
        check_run(exe_browser, exe, tmp, args.artifacts, name, text)


def main():
    return trb.browser_test("test_report_lens", checks)


if __name__ == "__main__":
    sys.exit(main())
