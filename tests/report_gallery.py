#!/usr/bin/env python3
"""The eight kinds of `attnlab report` page, from runs trained long enough to mean something,
screenshotted in headless Chromium: the pictures docs/watching.md shows, and a gallery to read
the report by (issue 44's acceptance: can a reader tell from each screenshot alone whether the
run solved its task and when, which layer's gradients were largest and what each head attends to).

usage: tests/report_gallery.py --attnlab build/attnlab --out DIR [--width 1280] [--docs docs/figures]

Trains into DIR/runs (a run already there is kept, not trained again), writes DIR/<kind>.html with
`attnlab report --eager` and DIR/<kind>.png (the page's top, --height px) and DIR/<kind>-full.png
(the whole page). With --docs, copies the character LM's, the L-sized run's and the comparison's
screenshots there as report_<kind>.png. Runs niced, one thread each: about 10 CPU-minutes, most
of it the L-sized run (the shape of docs/benchmark.md's L, 2,000 steps of one sequence).
"""
import argparse
import base64
import os
import shutil
import subprocess
import sys

from chromium_pipe import Browser
from test_report_browser import L_SHAPE, browser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUIET = ["--quiet", "--threads", "1"]
# Each kind: the runs it shows, as (name, train flags).
RUNS = {
    "reverse": ["--task", "reverse", "--probe-every", "20"],
    "sort_decoder": ["--task", "sort", "--model", "decoder", "--probe-every", "20", "--steps", "2000"],
    "add_seq2seq": ["--task", "add", "--model", "seq2seq", "--probe-every", "50", "--steps", "3000"],
    "char_lm": ["--task", "text", "--file", os.path.join(ROOT, "data", "text", "logbook.txt"), "--model", "decoder",
                "--seq-len", "64", "--steps", "1500", "--probe-every", "50", "--target", "0"],
    "reverse_post_ln": ["--task", "reverse", "--norm", "post", "--probe-every", "20"],
    "reverse_seed1": ["--task", "reverse", "--probe-every", "20", "--seed", "1"],
    "reverse_seed2": ["--task", "reverse", "--probe-every", "20", "--seed", "2"],
    "L": ["--task", "reverse", *L_SHAPE, "--batch", "1", "--steps", "2000", "--probe-every", "10", "--target", "0",
          "--heldout", "20"],
}
SMALL = ["--d-model", "32", "--heads", "2", "--layers", "2", "--d-ff", "64", "--steps", "300", "--eval-every", "50"]
# Each page: its runs (or sweep/study directory) and its --input.
PAGES = {
    "reverse": (["reverse"], "3 1 4 1 5"),
    "sort_decoder": (["sort_decoder"], "5 2 9 2 7 1 8 3"),
    "add_seq2seq": (["add_seq2seq"], None),
    "char_lm": (["char_lm"], "the ship "),
    "comparison": (["reverse", "reverse_post_ln", "reverse_seed1", "reverse_seed2"], None),
    "sweep": (["sweep"], None),
    "tuning_study": (["tune"], None),
    "L": (["L"], None),
}
DOCS = ("char_lm", "L", "comparison")


def run(cmd):
    r = subprocess.run(["nice", *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")


def train_all(exe, runs):
    os.makedirs(runs, exist_ok=True)
    for name, flags in RUNS.items():
        if not os.path.exists(os.path.join(runs, name, "summary.json")):
            run([exe, "train", *flags, *QUIET, "--run", os.path.join(runs, name)])
    tools = os.path.join(ROOT, "scripts", "tools")
    if not os.path.exists(os.path.join(runs, "sweep", "summary.csv")):
        run([sys.executable, os.path.join(tools, "sweep.py"), "--out", os.path.join(runs, "sweep"), "--attnlab", exe,
             "--grid", "lr=3e-4,1e-3,3e-3", "--grid", "layers=1,2", "--", "--task", "reverse", *SMALL[:4], *SMALL[6:]])
    if not os.path.exists(os.path.join(runs, "tune", "summary.csv")):
        run([sys.executable, os.path.join(tools, "tune.py"), "--out", os.path.join(runs, "tune"), "--attnlab", exe,
             "--param", "lr=log:1e-4:1e-2", "--param", "layers=int:1:3", "--trials", "8", "--study-seed", "0", "--",
             "--task", "reverse", *SMALL[:4], *SMALL[6:]])


def screenshot(exe_browser, page, png, width, height):
    """The page's top (width x height) and the whole page, with everything built (--eager)."""
    b = Browser(exe_browser, page + ".profile", width=width, height=height)
    try:
        b.open("file://" + page)
        b.screenshot(png)
        size = b.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = b.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                      clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        with open(png.replace(".png", "-full.png"), "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    finally:
        b.close()
        shutil.rmtree(page + ".profile", ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnlab", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1400)
    ap.add_argument("--docs", help="folder to copy the docs' three screenshots into")
    args = ap.parse_args()
    exe_browser = browser()
    if not exe_browser:
        sys.exit("no chromium on PATH (scripts/install-deps.sh installs it)")
    runs = os.path.join(args.out, "runs")
    train_all(args.attnlab, runs)
    for kind, (names, text) in PAGES.items():
        page = os.path.join(os.path.abspath(args.out), kind + ".html")
        inputs = ["--input", text] if text else []
        run([args.attnlab, "report", *(os.path.join(runs, n) for n in names), *inputs, "--eager", "--out", page])
        screenshot(exe_browser, page, page.replace(".html", ".png"), args.width, args.height)
        print(f"{kind}: {page} ({os.path.getsize(page) / 1e6:.2f} MB)")
        if args.docs and kind in DOCS:
            shutil.copy(page.replace(".html", ".png"), os.path.join(args.docs, f"report_{kind}.png"))


if __name__ == "__main__":
    main()
