#!/usr/bin/env python3
"""`attnlab report`'s verdicts, run table and notes on what is uncertain, in headless Chromium
(a ctest test; needs chromium, else skipped).

Trains tiny runs (a text language model, a repeat language model, a copy run with --target 0, a solved copy run, an
unsolved reverse run), writes their reports and checks, in the page:
  - a language model's verdict gives summary.json's held-out bits per character and the unigram
    and bigram baselines, equal to those computed here from the run's text and split, and says
    nothing of exact match; a repeat model's verdict gives its in-context loss and late-token accuracy
    and no baselines; --target 0 says "no target set" and metrics.csv's best held-out exact
    match; an unsolved run says "not solved" and no -1 is on the page; a solved run's verdict names
    summary.json's solved_at_step;
  - the run table: each summary.json figure once, labelled in words, rounded, with its raw value in
    data-value; "you set" lists the options of the command line, "attnlab resolved" the rest of
    config.ini's values that differ from train's defaults;
  - the notes: metrics.csv's last line cut mid-write, a run still training (its lock held), a run
    interrupted (no summary.json);
  - --eager builds every part before the page's load event; without it, unbuilt parts say that
    they draw when scrolled to;
  - a bad --eager is refused with the line docs/errors.md lists.
Keeps a screenshot of each page under --artifacts.

Exit 0: passed; 1: failed; 77: no chromium on PATH (ctest: skipped).
"""
import fcntl
import json
import math
import os
import re
import shutil
import subprocess
import sys

import test_report_browser as trb
from test_report_browser import TINY, attnlab, check, load_page, read_csv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# In the page: each run section's verdict, notes, table rows and settings lists.
GLANCE = """JSON.stringify([...document.querySelectorAll('section[id^="run-"]')].map((sec) => ({
  verdict: sec.querySelector("[data-verdict]")?.textContent ?? null,
  kind: sec.querySelector("[data-verdict]")?.getAttribute("data-verdict") ?? null,
  baselines: Object.fromEntries([...sec.querySelectorAll("[data-baseline]")].map((b) =>
    [b.dataset.baseline, [b.textContent, b.dataset.value]])),
  notes: [...sec.querySelectorAll(".uncertain")].map((n) => [n.dataset.note, n.textContent, n.getBoundingClientRect().height]),
  figures: [...sec.querySelectorAll("[data-summary]")].map((f) =>
    [f.dataset.summary, f.dataset.value, f.textContent, f.closest("tr").querySelector("th").textContent]),
  settings: Object.fromEntries([...sec.querySelectorAll("[data-settings]")].map((s) => [s.dataset.settings, s.textContent])),
  text: sec.innerText })))"""
UNBUILT = """JSON.stringify([...document.querySelectorAll('[data-built="no"]')].map((n) =>
  [n.innerText, n.querySelector(".later-note")?.getBoundingClientRect().height ?? 0]))"""


def rounded(v):
    """runs.js's rounded(): 3 significant digits (integers whole, thousands separated)."""
    if float(v).is_integer():
        return f"{int(v):,}"
    g = float(f"{v:.3g}")
    return str(int(g)) if g.is_integer() else repr(g)


def page_glance(exe_browser, page, artifacts, height=1400):
    b = load_page(exe_browser, page, height)
    try:
        b.screenshot(os.path.join(artifacts, "verdict-" + os.path.basename(page).replace(".html", ".png")))
        check(b.evaluate('document.body.getAttribute("data-rendered")') == "ok", f"{page}: did not render")
        return json.loads(b.evaluate(GLANCE)), b.evaluate("document.body.innerText")
    finally:
        b.close()


def report(exe, run, *flags):
    page = run + ".html"
    attnlab(exe, "report", run, "--out", page, *flags)
    return page


def config(path):
    lines = [line.split("=", 1) for line in open(path) if "=" in line and not line.startswith("#")]
    return {k.strip(): v.strip() for k, v in lines}


def text_baselines(run):
    """The unigram and add-one bigram bits per held-out character, from the run's file and split (datasets/text.cpp)."""
    cfg = config(os.path.join(run, "config.ini"))
    text = open(cfg["file"], encoding="utf-8").read()
    n = len(text)
    cut = n - max(1, math.floor(float(cfg["heldout-fraction"]) * n))
    train, held = text[:cut], text[cut:]
    chars = sorted(set(text))
    v = len(chars)
    uni = {c: train.count(c) for c in chars}
    pairs, ctx = {}, {}
    for a, b in zip(train, train[1:]):
        pairs[a + b] = pairs.get(a + b, 0) + 1
        ctx[a] = ctx.get(a, 0) + 1
    u = -sum(math.log2((uni[c] + 1) / (len(train) + v)) for c in held) / len(held)
    prev = train[-1] + held
    bg = -sum(math.log2((pairs.get(prev[i] + c, 0) + 1) / (ctx.get(prev[i], 0) + v)) for i, c in enumerate(held)) / len(held)
    return {"unigram": u, "bigram": bg}


def check_figures(name, glance, summary):
    """Each summary.json figure once, its data-value the file's, its row labelled and rounded in words."""
    keys = [f[0] for f in glance["figures"]]
    check(sorted(keys) == sorted(summary), f"{name}: figures shown {sorted(keys)}, summary.json has {sorted(summary)}")
    for key, raw, text, label in glance["figures"]:
        want = summary.get(key)
        ok = float(raw) == want if isinstance(want, (int, float)) else raw == str(want)
        check(ok, f"{name}: {key}'s data-value {raw!r}, summary.json has {want!r}")
    shown = {f[0]: (f[2], f[3]) for f in glance["figures"]}
    s = summary
    words = {"heldout_exact": ("held-out exact match", rounded(s["heldout_exact"])),
             "seconds": ("time", f"{s['seconds']:.2f} s"),
             "optimizer_state_bytes": ("optimizer state", rounded(s["optimizer_state_bytes"] / 1000) + " kB"),
             "target_patience": ("target patience", f"{s['target_patience']} evaluation" + "s" * (s["target_patience"] != 1)),
             "heldout_token_acc": ("held-out token accuracy", rounded(s["heldout_token_acc"])),
             "steps": ("steps trained", rounded(s["steps"]))}
    for key, (label, text) in words.items():
        check(shown.get(key) == (text, label), f"{name}: {key} shown as {shown.get(key)}, expected {(text, label)}")


def check_settings(exe, name, glance, run, flags):
    """"you set": the command line's options; "attnlab resolved": the rest of what differs from the defaults."""
    given, it = {}, iter(flags)
    for flag in it:
        if flag in ("--run", "--quiet"):
            next(it) if flag == "--run" else None
            continue
        given[flag[2:]] = next(it)
    defaults = {}  # train's defaults as its --help shows them; a switch shown without one is off, a value empty
    for m in re.finditer(r"^  (?:-\w \[ )?--([\w-]+)(?: \])?( arg)?(?: \(=([^)]*)\))?", attnlab(exe, "train", "--help"), re.M):
        defaults[m.group(1)] = m.group(3) if m.group(3) is not None else "" if m.group(2) else "false"
    differing = {k: v for k, v in config(os.path.join(run, "config.ini")).items() if defaults.get(k) != v}
    resolved = {k: v for k, v in differing.items() if k not in given}
    lines = (lambda d: "\n".join(f"{k} = {v}" for k, v in sorted(d.items())) or "(none)")
    check(glance["settings"].get("given") == lines(given), f"{name}: 'you set' {glance['settings'].get('given')!r}, "
          f"the command line gave {lines(given)!r}")
    check(glance["settings"].get("resolved") == lines(resolved), f"{name}: 'attnlab resolved' "
          f"{glance['settings'].get('resolved')!r}, expected {lines(resolved)!r}")
    check(resolved, f"{name}: attnlab resolved nothing (init is resolved in every run)")


def check_text_lm(exe_browser, exe, tmp, artifacts):
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 60)
    run = os.path.join(tmp, "textlm")
    flags = ["--task", "text", "--file", corpus, "--seq-len", "16", "--model", "decoder", *TINY, "--run", run]
    attnlab(exe, "train", *flags)
    (glance,), _ = page_glance(exe_browser, report(exe, run), artifacts)
    summary = json.load(open(os.path.join(run, "summary.json")))
    want = text_baselines(run)
    bits = f"{summary['heldout_bits_per_char']:.2f} bits/char on held-out text"
    check(glance["kind"] == "text" and glance["verdict"].startswith(bits + "; a unigram model: "),
          f"textlm: verdict {glance['verdict']!r}, expected it to start {bits!r}")
    check("exact" not in glance["verdict"], f"textlm: an exact-match verdict: {glance['verdict']!r}")
    for kind, value in want.items():
        text, raw = glance["baselines"].get(kind, ("", "nan"))
        check(text == f"{value:.2f}" and abs(float(raw) - value) < 1e-9,
              f"textlm: the {kind} baseline shown {text} ({raw}), computed here {value}")
    check_figures("textlm", glance, summary)
    check_settings(exe, "textlm", glance, run, flags[:-2] + ["--run", run])


def check_repeat_lm(exe_browser, exe, tmp, artifacts):
    """A language model of tokens (repeat): its in-context loss and late-token accuracy, no baselines, no exact match."""
    run = os.path.join(tmp, "repeatlm")
    flags = ["--task", "repeat", "--vocab", "6", "--min-len", "3", "--max-len", "6", "--model", "decoder", *TINY, "--run", run]
    attnlab(exe, "train", *flags)
    (glance,), _ = page_glance(exe_browser, report(exe, run), artifacts)
    summary = json.load(open(os.path.join(run, "summary.json")))
    want = (f"in-context loss {rounded(summary['heldout_in_context_loss'])} nats (the late tokens' loss less the early "
            f"ones'); late-token accuracy {rounded(summary['heldout_late_token_acc'])}")
    check(glance["kind"] == "in-context" and glance["verdict"] == want,
          f"repeatlm: verdict {glance['verdict']!r} ({glance['kind']}), expected {want!r}")
    check(not glance["baselines"], f"repeatlm: text baselines shown for a repeat run: {glance['baselines']}")
    check_figures("repeatlm", glance, summary)


def check_targets(exe_browser, exe, tmp, artifacts):
    """--target 0: "no target set" and the best held-out figure; solved: its step; unsolved: "not solved", no -1."""
    runs = {"notarget": ["--task", "copy", "--model", "encoder", "--target", "0"],
            "solved": ["--task", "copy", "--model", "encoder", "--target", "0.02"],
            "unsolved": ["--task", "reverse", "--model", "decoder"]}
    for name, flags in runs.items():
        run = os.path.join(tmp, name)
        attnlab(exe, "train", *flags, *TINY, "--run", run)
        (glance,), body = page_glance(exe_browser, report(exe, run), artifacts)
        summary = json.load(open(os.path.join(run, "summary.json")))
        check_figures(name, glance, summary)
        if name == "notarget":
            rows = [r for r in read_csv(os.path.join(run, "metrics.csv")) if r["heldout_exact"] != ""]
            best = max(rows, key=lambda r: float(r["heldout_exact"]))
            want = f"no target set; best held-out exact match {rounded(float(best['heldout_exact']))} at step {best['step']}"
            check(glance["verdict"] == want, f"{name}: verdict {glance['verdict']!r}, expected {want!r}")
            unreached = {f[0]: f[2] for f in glance["figures"] if f[0] in ("solved_at_step", "target_first_reached_at_step")}
            check(set(unreached.values()) == {"no target set"}, f"{name}: with no target, {unreached}")
        elif name == "solved":
            check(summary["solved_at_step"] > 0, f"{name}: the run did not solve its task: {summary}")
            want = f"solved at step {summary['solved_at_step']}: held-out exact match reached the target 0.02"
            check(glance["verdict"] == want, f"{name}: verdict {glance['verdict']!r}, expected {want!r}")
        else:
            check(summary["solved_at_step"] == -1, f"{name}: the run solved its task: {summary}")
            check(glance["kind"] == "not-solved" and glance["verdict"].startswith("not solved: held-out exact match "),
                  f"{name}: verdict {glance['verdict']!r}")
            check("not solved" in [f[2] for f in glance["figures"] if f[0] == "solved_at_step"], f"{name}: solved row")
            minus_one = re.findall(r".{0,30}(?<![\w.])-1(?![\d.]).{0,30}", body)
            check(not minus_one, f"{name}: -1 on the page: {minus_one}")


def check_notes(exe_browser, exe, tmp, artifacts):
    """metrics.csv's cut last line, a run still training (its lock held), a run interrupted (no summary.json)."""
    base = os.path.join(tmp, "unsolved")
    cases = {}
    for name in ("truncated", "running", "interrupted"):
        cases[name] = os.path.join(tmp, name)
        shutil.copytree(base, cases[name])
    with open(os.path.join(cases["truncated"], "metrics.csv"), "a") as f:
        f.write("45,0.7")  # a row cut mid-write
    for name in ("running", "interrupted"):  # a run ends by writing summary.json
        os.remove(os.path.join(cases[name], "summary.json"))
    lock = open(os.path.join(cases["running"], ".lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # as a process training the run holds it
    pages = {name: report(exe, run) for name, run in cases.items()}
    lock.close()
    texts = {"truncated": "metrics.csv's last line was incomplete (a run writing or cut off) and is left out",
             "running": "still training: a process holds this run's lock; the page shows it as of its last logged step",
             "interrupted": "interrupted: no summary.json and no process training it; the figures are those of its last "
                            "logged step and checkpoint"}
    exact = json.load(open(os.path.join(base, "summary.json")))["heldout_exact"]
    verdicts = {"truncated": f"not solved: held-out exact match {rounded(exact)}, target 1",
                "running": "still training: no verdict until it ends",
                "interrupted": "no verdict: the run was interrupted before its end"}
    for name, page in pages.items():
        (glance,), _ = page_glance(exe_browser, page, artifacts)
        notes = [(n[0], n[1]) for n in glance["notes"]]
        check(notes == [(name, texts[name])], f"{name}: notes {notes}, expected {[(name, texts[name])]}")
        check(all(n[2] > 10 for n in glance["notes"]), f"{name}: a note is not visible: {glance['notes']}")
        check(glance["verdict"] == verdicts[name], f"{name}: verdict {glance['verdict']!r}, expected {verdicts[name]!r}")
    points = len(read_csv(os.path.join(base, "metrics.csv")))
    check(points == len(read_csv(os.path.join(cases["truncated"], "metrics.csv"))) - 1, "truncated: the test's cut row")
    check_unfinished_text_lm(exe_browser, exe, tmp, artifacts)


def check_unfinished_text_lm(exe_browser, exe, tmp, artifacts):
    """An interrupted language model: bits per character at its last evaluation, from metrics.csv's heldout_loss."""
    run = os.path.join(tmp, "textlm-interrupted")
    shutil.copytree(os.path.join(tmp, "textlm"), run)
    os.remove(os.path.join(run, "summary.json"))
    last = [r for r in read_csv(os.path.join(run, "metrics.csv")) if r["heldout_loss"] != ""][-1]
    (glance,), _ = page_glance(exe_browser, report(exe, run), artifacts)
    want = (f"interrupted, at its last evaluation (step {last['step']}): "
            f"{float(last['heldout_loss']) / math.log(2):.2f} bits/char on held-out text; a unigram model: ")
    check(glance["kind"] == "text" and glance["verdict"].startswith(want),
          f"interrupted text LM: verdict {glance['verdict']!r}, expected it to start {want!r}")


def check_old_run(exe_browser, exe, tmp, artifacts):
    """A run trained before given_options.ini: the settings differing from the defaults, saying why."""
    run = os.path.join(tmp, "old")
    shutil.copytree(os.path.join(tmp, "unsolved"), run)
    os.remove(os.path.join(run, "given_options.ini"))
    (glance,), _ = page_glance(exe_browser, report(exe, run), artifacts)
    want = ("settings differing from the defaults\td-ff = 32\n", "(this run did not record which of them you gave: "
            "trained before attnlab kept given_options.ini)")
    check(glance["settings"] == {} and all(w in glance["text"] for w in want) and "init = torch" in glance["text"],
          f"old run: settings {glance['settings']}, text {glance['text'][-400:]!r}")


def check_eager(exe_browser, exe, tmp, artifacts):
    """Without --eager parts below the fold wait, saying they draw when scrolled to; with it none waits at load."""
    run = os.path.join(tmp, "unsolved")
    for flags, name in (([], "lazy"), (["--eager"], "eager")):
        page = os.path.join(tmp, name + ".html")
        attnlab(exe, "report", run, "--input", "3 1 4 1", "--out", page, *flags)
        b = load_page(exe_browser, page, 700)
        try:
            unbuilt = json.loads(b.evaluate(UNBUILT))
            b.evaluate('document.querySelector("[data-built]").scrollIntoView()')
            b.screenshot(os.path.join(artifacts, f"verdict-{name}-parts.png"))
        finally:
            b.close()
        if name == "eager":
            check(unbuilt == [], f"--eager: {len(unbuilt)} parts unbuilt at load")
        else:
            check(unbuilt and all(t.endswith("draws when scrolled to") and h > 5 for t, h in unbuilt),
                  f"lazy page: unbuilt parts {unbuilt[:3]} do not say they draw when scrolled to")


def check_refusal(exe, tmp):
    r = subprocess.run([os.path.abspath(exe), "report", "x", "--eager=yes"], capture_output=True, text=True, cwd=tmp)
    line = r.stderr.strip()
    table = open(os.path.join(ROOT, "docs", "errors.md")).read()
    check(r.returncode == 2 and "\n" not in line and f"| `attnlab report x --eager=yes` | 2 | `{line}` |" in table,
          f"report --eager=yes: exit {r.returncode}, {line!r}, not as docs/errors.md lists it")


def checks(args, exe_browser, tmp):
    check_text_lm(exe_browser, args.attnlab, tmp, args.artifacts)
    check_repeat_lm(exe_browser, args.attnlab, tmp, args.artifacts)
    check_targets(exe_browser, args.attnlab, tmp, args.artifacts)
    check_notes(exe_browser, args.attnlab, tmp, args.artifacts)
    check_old_run(exe_browser, args.attnlab, tmp, args.artifacts)
    check_eager(exe_browser, args.attnlab, tmp, args.artifacts)
    check_refusal(args.attnlab, tmp)


def main():
    return trb.browser_test("test_report_verdicts", checks)


if __name__ == "__main__":
    sys.exit(main())
