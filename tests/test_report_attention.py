#!/usr/bin/env python3
"""The report's attention you can read, in headless Chromium (a ctest test; needs chromium, else skipped).

Two runs: a seq2seq reverse at 64 tokens (--min-len 64 --max-len 64) reported with README's own
`--input "3 1 4 1 5"` (another length than training's), and a character LM reading 64 characters
with spaces and newlines. On each page, once every row is built:
  - every map's key and query labels (drawn on canvas; their boxes in data-labels) do not overlap,
    lie inside the canvas and its margins, and are the tokens' glyphs (a space as U+2423);
  - each layer's thumbnails lie on one row beside its label; a seq2seq example's rows line up;
  - a click on a thumbnail opens the enlarged view with every token labelled; Escape and a click
    beside it close it; a hover on a cell, thumbnail or enlarged, names layer, head, query and
    key tokens and positions and the weight of data-w;
  - each head's summary (data-summary, the last layer's sentences) equals the one computed here
    from its weights (data-w);
  - the --input shows predict's answer, the expected answer and predict's note; a wrong held-out
    answer marks exactly the tokens that differ from the reversed input.
Screenshots (thumbnail grid, enlarged view, 64-token page) go to --artifacts.
"""
import json
import os
import subprocess
import sys

import test_report_browser as trb
from test_report_browser import BUILD_ALL, TINY, attnlab, check, load_page

GLYPHS = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"}

# In the page: every map (thumbnails and the enlarged one) with what the checks read.
MAPS = """JSON.stringify([...document.querySelectorAll("canvas.attn-map, canvas.attn-zoom")].map((c) => {
  const b = c.getBoundingClientRect();
  return { cls: c.className, run: c.dataset.run, example: c.dataset.example, layer: c.dataset.layer,
           head: +c.dataset.head, w: c.dataset.w, scale: +c.dataset.scale, labels: JSON.parse(c.dataset.labels),
           summary: JSON.parse(c.dataset.summary), left: +c.dataset.left, top: +c.dataset.top,
           cell: +c.dataset.cell, width: c.width, height: c.height, x: b.left + c.clientLeft, y: b.top + c.clientTop };
}))"""
# Each layer row: its label's box and its thumbnails' boxes.
ROWS = """JSON.stringify([...document.querySelectorAll("div.layer-row")].map((r) => {
  const box = (e) => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  return { example: r.dataset.example, layer: r.dataset.layer, row: box(r),
           label: box(r.querySelector(".layer-name")), maps: [...r.querySelectorAll("canvas")].map(box) };
}))"""


def glyph(token):
    return "".join(GLYPHS.get(ch, ch) for ch in token)


def weights(m):
    return [[int(v) / m["scale"] for v in row.split(",")] for row in m["w"].split(";")]


def summary(w, causal):
    """headSummary (cli/report/attention_summary.js), computed from the weights."""
    rows, cols = len(w), len(w[0])

    def mean(pick):
        vals = [w[i][pick(i)] for i in range(rows)
                if pick(i) is not None and 0 <= pick(i) < cols and not (causal and pick(i) > i)]
        return sum(vals) / len(vals) if vals else None
    offset = sum(w[i][j] * (j - i) for i in range(rows) for j in range(cols)) / rows
    return {"previous": mean(lambda i: i - 1 if i >= 1 else None), "first": mean(lambda i: 0),
            "anti": mean(lambda i: cols - 1 - i), "self": mean(lambda i: i), "offset": offset}


def close(a, b):
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-9)


def check_labels(m, queries, keys, every, what):
    """Label boxes inside the canvas and its margins, apart, the tokens' glyphs, every k-th (all if every)."""
    for axis, tokens, end, start in (("q", queries, 5, 3), ("k", keys, 4, 2)):  # boxes [i, text, x0, y0, x1, y1]
        boxes = m["labels"][axis]
        inside = all(0 <= b[2] <= b[4] <= m["width"] and 0 <= b[3] <= b[5] <= m["height"] for b in boxes)
        check(inside, f"{what}: {axis} labels clipped by the canvas {boxes[:2]}")
        margin = all(b[4] <= m["left"] for b in boxes) if axis == "q" else all(b[5] <= m["top"] for b in boxes)
        check(margin, f"{what}: {axis} labels run into the cells")
        apart = all(a[end] <= b[start] for a, b in zip(boxes, boxes[1:]))
        check(apart, f"{what}: {axis} labels overlap")
        idx = [b[0] for b in boxes]
        step = idx[1] - idx[0] if len(idx) > 1 else 1
        check(idx == list(range(0, len(tokens), step)) and (not every or step == 1),
              f"{what}: {axis} labels at {idx[:6]}..., not every {'' if every else 'k-th '}token of {len(tokens)}")
        check([b[1] for b in boxes] == [glyph(tokens[i]) for i in idx], f"{what}: {axis} labels are not the tokens")


def page_maps(b):
    return json.loads(b.evaluate(MAPS))


def check_maps(b, tokens, causal, what):
    """Every thumbnail's labels (thinned, apart, unclipped, the tokens' glyphs) and summary."""
    maps = [m for m in page_maps(b) if m["cls"] == "attn-map"]
    check(maps, f"{what}: no attention maps")
    for m in maps:
        queries, keys = tokens[(m["example"], m["layer"])]
        name = f"{what}: example {m['example']} {m['layer']} head {m['head']}"
        check_labels(m, queries, keys, False, name)
        want = summary(weights(m), causal[m["layer"]])
        check(all(close(m["summary"][k], v) for k, v in want.items()), f"{name}: summary {m['summary']}, want {want}")
    return maps


def check_rows(b, what, lined_up):
    """Each layer's thumbnails on one line beside its label; with lined_up, an example's rows'
    cells start at the same x."""
    rows = json.loads(b.evaluate(ROWS))
    for r in rows:
        tops = {round(m[1], 3) for m in r["maps"]}
        check(len(tops) == 1 and r["label"][2] <= min(m[0] for m in r["maps"]) and r["label"][1] <= r["maps"][0][1]
              and r["row"][3] - r["row"][1] < 2 * (r["maps"][0][3] - r["maps"][0][1]),
              f"{what}: {r['layer']} (example {r['example']}) is not one row beside its label: {r}")
    if lined_up:
        for ex in {r["example"] for r in rows}:
            lefts = {tuple(round(m[0], 3) for m in r["maps"]) for r in rows if r["example"] == ex}
            check(len(lefts) == 1, f"{what}: example {ex}'s rows do not line up: {lefts}")


def tip_at(b, x, y):
    b.move_mouse(x, y)
    return b.evaluate("document.getElementById('tip').hidden ? '' : document.getElementById('tip').textContent")


def check_tip(b, m, i, j, queries, keys, what):
    """The tip over cell (i, j) of map m: layer, head, query and key tokens and positions, weight."""
    x, y = m["x"] + m["left"] + (j + 0.5) * m["cell"], m["y"] + m["top"] + (i + 0.5) * m["cell"]
    want = (f"layer {m['layer']}, head {m['head']}\nquery {glyph(queries[i])} (position {i}) \u2192 key "
            f"{glyph(keys[j])} (position {j})\nweight {weights(m)[i][j]:.4f}")
    got = tip_at(b, x, y)
    check(got.startswith(want + "\n"), f"{what}: tip over cell ({i}, {j}) is {got!r}, want {want!r}")


def click(b, x, y):
    for kind in ("mousePressed", "mouseReleased"):
        b.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def zoom_open(b):
    return b.evaluate("!!document.getElementById('attn-zoom')")


def check_zoom(b, m, queries, keys, shot, what):
    """A click on thumbnail m opens its enlarged view with every token labelled and the same
    weights; a hover there names the cell; Escape closes it, and so does a click beside it."""
    b.evaluate(f"document.querySelectorAll('canvas.attn-map')[{m['index']}].scrollIntoView({{block: 'center'}})")
    m.update(next(n for n in page_maps(b) if n["cls"] == "attn-map" and n["layer"] == m["layer"]
                  and n["head"] == m["head"] and n["example"] == m["example"] and n["run"] == m["run"]))
    click(b, m["x"] + m["left"] + 1, m["y"] + m["top"] + 1)
    zoomed = [z for z in page_maps(b) if z["cls"] == "attn-zoom"]
    check(len(zoomed) == 1, f"{what}: a click on a thumbnail opened {len(zoomed)} enlarged views")
    if not zoomed:
        return
    z = zoomed[0]
    check((z["layer"], z["head"], z["w"]) == (m["layer"], m["head"], m["w"]), f"{what}: the enlarged view is another map")
    check(z["cell"] >= 12, f"{what}: enlarged cells of {z['cell']} px")
    check_labels(z, queries, keys, True, what + " enlarged")
    b.screenshot(shot)
    i, j = len(queries) - 1, len(keys) // 2
    check_tip(b, z, i, j, queries, keys, what + " enlarged")
    b.call("Input.dispatchKeyEvent", type="keyDown", key="Escape", code="Escape", windowsVirtualKeyCode=27)
    check(not zoom_open(b), f"{what}: Escape did not close the enlarged view")
    click(b, m["x"] + m["left"] + 1, m["y"] + m["top"] + 1)
    check(zoom_open(b), f"{what}: a second click did not open the enlarged view")
    click(b, 3, b.evaluate("window.innerHeight") - 3)
    check(not zoom_open(b), f"{what}: a click beside the enlarged view did not close it")


SENTENCES = """JSON.stringify([...document.querySelectorAll("ul.head-sentences li")].map((li) => ({
  run: li.parentNode.dataset.run, example: li.parentNode.dataset.example, layer: li.dataset.layer,
  head: +li.dataset.head, pattern: li.dataset.pattern, text: li.textContent })))"""
PATTERNS = ["previous", "first", "anti", "self"]


def check_sentences(b, maps, what):
    """The last layers' sentences: each head's largest share, as computed from its weights."""
    found = json.loads(b.evaluate(SENTENCES))
    check(found, f"{what}: no sentences for the last layer's heads")
    for s in found:
        m = next(m for m in maps if (m["run"], m["example"], m["layer"], m["head"]) ==
                 (s["run"], s["example"], s["layer"], s["head"]))
        shares = {k: v for k, v in m["summary"].items() if k in PATTERNS and v is not None}
        best = max(PATTERNS, key=lambda k: shares.get(k, -1))
        words = "attends mostly to" if shares[best] >= 0.4 else "spreads its attention: at most"
        check(s["pattern"] == best and f"head {s['head']} {words}" in s["text"] and f"{shares[best]:.2f}" in s["text"],
              f"{what}: {s['layer']} head {s['head']}: {s['text']!r}, largest share {best} {shares[best]:.4f}")


def page_tokens(b):
    """(example, layer) -> (queries, keys) as the page's data holds them."""
    data = json.loads(b.evaluate("JSON.stringify(DATA.runs[0].attention.map((ex) => ex.layers.map((l) => "
                                 "[l.name, l.queries, l.keys])))"))
    return {(str(e), name): (q, k) for e, layers in enumerate(data) for name, q, k in layers}


def input_maps(exe, run, text, tmp):
    """`attnlab attention`'s layers for the --input: name -> (queries, keys, causal)."""
    out = os.path.join(tmp, os.path.basename(run) + ".maps")
    subprocess.run([exe, "attention", "--run", run, "--out", out, text], capture_output=True, check=True)
    meta = json.load(open(os.path.join(out, "attention.json")))
    return {la["name"]: (la["queries"], la["keys"], la["causal"]) for la in meta["layers"]}


def check_attention_page(b, exe, run, text, tmp, shots, lined_up):
    """The checks every page gets; returns its maps and the --input's layers."""
    what = os.path.basename(run)
    check(b.evaluate(BUILD_ALL) == 0, f"{what}: rows not built when scrolled into view")
    ref = input_maps(exe, run, text, tmp)
    tokens = page_tokens(b)
    for name, (q, k, _) in ref.items():  # the --input is the page's example 3
        check(tokens.get(("3", name)) == (q, k), f"{what}: the --input's tokens of {name} are not attention's")
    causal = {name: c for name, (_, _, c) in ref.items()}
    maps = check_maps(b, tokens, causal, what)
    check_rows(b, what, lined_up)
    b.call("Emulation.setDeviceMetricsOverride", width=600, height=1000, deviceScaleFactor=1, mobile=False)
    check_rows(b, what + " at 600 px", lined_up)  # a row too wide for the window scrolls; it does not wrap
    b.call("Emulation.setDeviceMetricsOverride", width=1280, height=1000, deviceScaleFactor=1, mobile=False)
    check_sentences(b, maps, what)
    b.evaluate("document.getElementById('attention-0').scrollIntoView()")
    b.move_mouse(0, 0)
    b.screenshot(os.path.join(shots, what + "-attention-grid.png"))
    index = next(n for n, m in enumerate(maps) if m["example"] == "3")
    m = dict(maps[index], index=index)
    q, k = tokens[("3", m["layer"])]
    b.evaluate(f"document.querySelectorAll('canvas.attn-map')[{index}].scrollIntoView({{block: 'center'}})")
    m.update(next(n for n in page_maps(b) if n["cls"] == "attn-map" and n["example"] == "3"))
    check_tip(b, m, len(q) - 1, 0, q, k, what + " thumbnail")
    check_zoom(b, m, q, k, os.path.join(shots, what + "-enlarged.png"), what)
    return maps, ref


INPUT_HEAD = """JSON.stringify((() => {
  const h = document.querySelector('.example-head[data-run="0"][data-example="3"]');
  const check = h.querySelector(".answer-check");
  return { answer: h.querySelector(".answer").textContent, check: check && check.textContent,
           correct: check && check.dataset.correct, notes: [...h.querySelectorAll(".predict-note")].map((p) => p.textContent),
           wrong: [...h.querySelectorAll(".tok-wrong")].map((s) => +s.dataset.pos) };
})())"""
EXAMPLE_ROWS = """JSON.stringify([...document.querySelectorAll("#examples-0 tr.right, #examples-0 tr.wrong")].map((tr) => ({
  cls: tr.className, input: tr.cells[0].textContent, tokens: [...tr.cells[1].querySelectorAll(".tok")].map((s) => s.textContent),
  wrong: [...tr.cells[1].querySelectorAll(".tok-wrong")].map((s) => +s.dataset.pos) })))"""


def differing(answer, expected):
    return [k for k in range(max(len(answer), len(expected)))
            if k >= len(answer) or k >= len(expected) or answer[k] != expected[k]]


def predict(exe, run, text):
    r = subprocess.run([exe, "predict", "--run", run, text], capture_output=True, text=True, check=True)
    return r.stdout.splitlines(), [line for line in r.stderr.splitlines() if line.startswith("note: ")]


def check_answers(b, exe, run, text, shots):
    """The --input as predict shows it, and the held-out answers' wrong tokens (reverse)."""
    for part, where in (("input", '.example-head[data-example="3"]'), ("examples", "#examples-0")):
        b.evaluate(f"document.querySelector('{where}').scrollIntoView(); window.scrollBy(0, -64)")
        b.move_mouse(0, 0)  # no tip left over from the hovers
        b.screenshot(os.path.join(shots, f"{os.path.basename(run)}-{part}.png"))
    out, notes = predict(exe, run, text)
    expected = text.split()[::-1]
    got = json.loads(b.evaluate(INPUT_HEAD))
    check(got["answer"] == out[0], f"--input: answer {got['answer']!r}, predict says {out[0]!r}")
    right = out[1] == "(correct)"
    check(got["check"] == ("right" if right else "wrong") + ": the expected answer is " + " ".join(expected)
          and got["correct"] == ("true" if right else "false"), f"--input: {got['check']!r}, predict says {out[1]!r}")
    check(notes and got["notes"] == notes, f"--input: notes {got['notes']}, predict's {notes}")
    check(got["wrong"] == differing(out[0].split(), expected), f"--input: marked tokens {got['wrong']}")
    rows = json.loads(b.evaluate(EXAMPLE_ROWS))
    wrong = [r for r in rows if r["cls"] == "wrong"]
    check(wrong, "no wrong held-out answer to mark")
    for r in rows:
        answer = predict(exe, run, r["input"])[0][0].split()
        want = differing(answer, r["input"].split()[::-1])
        shown = [t for t in r["tokens"]][:len(answer)]
        check(r["wrong"] == want and shown == answer and (r["cls"] == "wrong") == bool(want),
              f"held-out {r['input']!r}: marked {r['wrong']}, answer {answer}, differing {want}")


def checks(args, exe_browser, tmp):
    exe = args.attnlab
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("the quick brown fox\njumps over the lazy dog.\n" * 60)
    rev, lm = os.path.join(tmp, "rev64"), os.path.join(tmp, "charlm")
    attnlab(exe, "train", "--task", "reverse", "--model", "seq2seq", "--min-len", "64", "--max-len", "64",
            "--heldout", "12", *TINY, "--run", rev)
    heads8 = [v if k != "--heads" else "8" for k, v in zip([""] + TINY, TINY)]  # a row of 8 thumbnails
    attnlab(exe, "train", "--task", "text", "--file", corpus, "--seq-len", "64", "--model", "decoder", *heads8,
            "--run", lm)
    pages = [(rev, "3 1 4 1 5", True), (lm, "the lazy dog.\njumps over the quick brown fox\nthe lazy dog", False)]
    for run, text, is_rev in pages:
        page = run + ".html"
        attnlab(exe, "report", run, "--input", text, "--out", page)
        b = load_page(exe_browser, page, 1000)
        try:
            check(b.evaluate('document.body.getAttribute("data-rendered")') == "ok", f"{page}: not rendered")
            ref = check_attention_page(b, exe, run, text, tmp, args.artifacts, is_rev)[1]
            if is_rev:
                check_answers(b, exe, run, text, args.artifacts)
            else:
                keys = next(iter(ref.values()))[1]
                check(" " in keys and "\n" in keys, f"{page}: the --input's keys hold no space or newline")
        finally:
            b.close()


def main():
    return trb.browser_test("test_report_attention", checks)


if __name__ == "__main__":
    sys.exit(main())
