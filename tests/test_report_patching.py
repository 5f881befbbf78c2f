#!/usr/bin/env python3
"""The report's activation patching maps, in headless Chromium (a ctest test; needs chromium, else skipped).

An encoder and a seq2seq run, each reported with two --clean/--corrupt pairs. On each page (after
tests/test_report_browser.py's page checks, the layout checks among them), for each pair:
  - every cell of the residual stream maps (a row per hook point, a column per position, one map
    per stack) and of the head map (a row per block's attention, a column per head) holds the
    value `attnlab patch --json` prints for the same pair (its "total"), in the diverging
    colour of that value (white at 0, red for restored, blue for pushed away);
  - the column labels are the clean tokens, with the corrupted tokens under them and "*" at the
    corrupted positions;
  - a hover over cells shows the point (or head), the position and tokens, the value and both LDs.
A pair the run refuses (different lengths) or a --clean without its --corrupt: exit 2, one line,
no page. Screenshots of the patching view go to --artifacts.
"""
import json
import os
import subprocess
import sys

import test_report_browser as trb
from test_report_browser import TINY, TIP, attnlab, check, check_page, load_page

# In the page: every patching cell with its pair, map, row, column, value, colour and centre.
CELLS = """JSON.stringify([...document.querySelectorAll(".patching-view rect[data-row]")].map((r) => {
  const b = r.getBoundingClientRect(), map = r.closest("svg.patch-map");
  return { run: +r.closest(".patching-view").dataset.run, pair: +r.closest(".patch-pair").dataset.pair,
           kind: map.dataset.kind, map: [...r.closest(".patch-pair").querySelectorAll("svg.patch-map")].indexOf(map),
           row: r.dataset.row, col: +r.dataset.col, value: r.dataset.value, fill: r.getAttribute("fill"),
           tip: r.dataset.tip, x: (b.left + b.right) / 2, y: (b.top + b.bottom) / 2 };
}))"""
# Each map's column labels, line by line, with their class.
LABELS = """JSON.stringify([...document.querySelectorAll(".patch-pair")].map((p) =>
  [...p.querySelectorAll("svg.patch-map")].map((m) => [...m.querySelectorAll("text[text-anchor=middle]")].map((t) =>
    [t.textContent, t.getAttribute("class"), +t.getAttribute("y")]))))"""


def color(v):
    """patching_view.js's patchColor."""
    if v is None:
        return "#ccc"
    c = round(255 * (1 - min(1, abs(v))))
    return f"rgb(255,{c},{c})" if v >= 0 else f"rgb({c},{c},255)"


def expected_cells(result):
    """The cells `attnlab patch --json`'s result gives, keyed (map index, row, column): value."""
    out, total = {}, result["total"]
    for m, stack in enumerate(result["stacks"]):
        for r in total["residual"]:
            if r["stack"] == stack["stack"]:
                out.update({(m, r["point"], j): v for j, v in enumerate(r["values"])})
    for h in total["heads"]:
        block, head = h["name"].rsplit(".h", 1)
        out[(len(result["stacks"]), block, int(head))] = h["value"]
    return out


def check_pair(b, cells, labels, result, run, k, what):
    mine = [c for c in cells if c["pair"] == k]
    want = expected_cells(result)
    got = {(c["map"], c["row"], c["col"]): c for c in mine}
    check(set(got) == set(want), f"{what}: cells {sorted(set(got) ^ set(want))[:4]} differ from patch --json's")
    for key, v in want.items():
        c = got.get(key)
        if c is None:
            continue
        value = None if c["value"] == "" else float(c["value"])
        same = (value is None and v is None) or (value is not None and v is not None and abs(value - v) <= 1e-12)
        check(same, f"{what}: cell {key} shows {value}, attnlab patch --json says {v}")
        check(c["fill"] == color(v), f"{what}: cell {key} is {c['fill']}, the colour of {v} is {color(v)}")
    for m, stack in enumerate(result["stacks"]):
        texts = labels[k][m]
        clean = [t for t in texts if t[2] == 12]
        corrupt = [t[0] for t in texts if t[2] == 25]
        marked = [j for j, t in enumerate(clean) if t[1] == "corrupted"]
        check(marked == stack["corrupted"], f"{what}: marked columns {marked}, corrupted {stack['corrupted']}")
        check([t[0].rstrip("*") for t in clean] == stack["clean_tokens"], f"{what}: column labels {clean}")
        check(corrupt == [stack["corrupt_tokens"][j] for j in stack["corrupted"]], f"{what}: corrupted labels {corrupt}")
    for c in [mine[0], mine[len(mine) // 2], mine[-1]]:  # hover: the tip under the pointer
        b.evaluate(f"window.scrollTo(0, {c['y']} + window.scrollY - 300)")
        fresh = [x for x in json.loads(b.evaluate(CELLS)) if x["pair"] == k and x["row"] == c["row"]
                 and x["col"] == c["col"] and x["map"] == c["map"]][0]
        b.move_mouse(fresh["x"], fresh["y"])
        tip = b.evaluate(TIP) or ""
        v = want[(c["map"], c["row"], c["col"])]
        check(tip.startswith(c["row"]) and f"restores {v:.3f} of the logit difference" in tip
              and f"LD_clean {result['total']['ld_clean']:.3f}" in tip, f"{what}: the tip over {c['row']} reads {tip!r}")


def check_report(exe_browser, exe, run, pairs, tmp, artifacts):
    page = run + ".html"
    flags = [x for clean, corrupt in pairs for x in ("--clean", clean, "--corrupt", corrupt)]
    attnlab(exe, "report", run, *flags, "--out", page)
    check_page(exe_browser, page, [run], exe, {}, artifacts)
    results = [json.loads(attnlab(exe, "patch", "--run", run, "--clean", c, "--corrupt", r, "--json")) for c, r in pairs]
    b = load_page(exe_browser, page, 1400)
    try:
        b.evaluate('document.querySelector(".patching-view").scrollIntoView()')
        b.screenshot(os.path.join(artifacts, "patching_" + os.path.basename(run) + ".png"))
        cells, labels = json.loads(b.evaluate(CELLS)), json.loads(b.evaluate(LABELS))
        check(len(labels) == len(pairs), f"{page}: {len(labels)} patching pairs drawn, {len(pairs)} given")
        for k, result in enumerate(results):
            check_pair(b, cells, labels, result, run, k, f"{os.path.basename(run)} pair {k}")
    finally:
        b.close()


def check_refusals(exe, run, tmp):
    page = os.path.join(tmp, "refused.html")
    for flags, line in (
            (["--clean", "3 1 4 1 5", "--corrupt", "3 1 2 1"], "attnlab report: the clean and corrupted inputs differ in "
             "length (clean 5 tokens, corrupt 4 tokens): patching copies activations position by position and needs "
             "equal lengths"),
            (["--clean", "3 1 4 1 5"], "attnlab report: --clean and --corrupt come in pairs; got 1 --clean and 0 --corrupt")):
        r = subprocess.run([exe, "report", run, *flags, "--out", page], capture_output=True, text=True)
        check(r.returncode == 2 and r.stderr.strip() == line and not os.path.exists(page),
              f"report {flags}: exit {r.returncode}, stderr {r.stderr!r}")


def checks(args, exe_browser, tmp):
    exe = args.attnlab
    runs = {"encoder": (["--model", "encoder"], [("3 1 4 1 5", "3 1 2 1 5"), ("5 5 0 1 2", "5 5 0 3 4")]),
            "seq2seq": (["--model", "seq2seq"], [("3 1 4 1 5", "3 1 4 1 0"), ("0 1 2 3 4", "4 1 2 3 0")])}
    for name, (model, pairs) in runs.items():
        run = os.path.join(tmp, name)
        attnlab(exe, "train", "--task", "reverse", *model, "--vocab", "6", "--min-len", "5", "--max-len", "5",
                "--heldout", "20", *TINY, "--run", run)
        check_report(exe_browser, exe, run, pairs, tmp, args.artifacts)
    check_refusals(exe, os.path.join(tmp, "encoder"), tmp)


def main():
    return trb.browser_test("test_report_patching", checks)


if __name__ == "__main__":
    sys.exit(main())
