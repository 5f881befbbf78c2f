#!/usr/bin/env python3
"""Length generalisation: train on inputs of length 8-12, evaluate
at 12, 14, 16, 20 and 32, for copy / reverse / sort x encoder / decoder / seq2seq x
every positional encoding, with today's training ("base") and with randomised
positions ("randpos": `--random-positions P`, sinusoidal and learned only).

    /usr/bin/python3 scripts/studies/length_study.py                       # the base grid, seed 0
    /usr/bin/python3 scripts/studies/length_study.py --variant randpos      # the grid with randomised positions
    /usr/bin/python3 scripts/studies/length_study.py --only reverse-encoder-learned --seeds 0 1 2
    /usr/bin/python3 scripts/studies/length_study.py --figures-only         # heatmaps and tables from the CSV

Every run trains to its in-distribution target (held-out exact match >= 99% on lengths
8-12, --target 0.99) or stops at its step cap, with the settings of the README's task
table (scripts/studies/experiments.py). Each cell is then scored by `attnlab eval --run DIR
--len N` (500 held-out examples of length N, greedy decoding). Runs go under
runs/length/ and are kept: a run whose directory holds a summary.json written by the
same command is not trained again (delete it, or pass --retrain).

Writes docs/figures/length_grid.csv (one row per run and evaluation length; rows of
runs not redone this time are kept), one heatmap per variant and model
(docs/figures/length_<variant>_<model>.png), and the tables of docs/length.md between
its `<!-- BEGIN name -->` / `<!-- END name -->` markers. Everything runs on one thread
per run (--threads 1), --jobs runs at a time.
"""
import argparse
import csv
import datetime
import os
import re
import sys
import threading
import time

from attnlab_runs.files import read_csv, read_summary
from attnlab_runs.launch import ROOT, checked_child, run_pool, train
from attnlab_runs.study import add_places, replace_block

TRAIN_LENS = (8, 12)
EVAL_LENS = [12, 14, 16, 20, 32]
# The table must hold the longest evaluated sequence: a decoder reads
# [bos] 32 inputs [sep] 32 answers + 1 = 67 positions.
POSITIONS = 80
RANDOM_POSITIONS = 80  # randpos: training positions are a sorted random subset of [0, 80)
TASKS = ["copy", "reverse", "sort"]
MODELS = ["encoder", "decoder", "seq2seq"]
POSITIONALS = ["sinusoidal", "learned", "rope", "none"]
VARIANTS = {"base": [], "randpos": ["--random-positions", str(RANDOM_POSITIONS)]}
VARIANT_POSITIONALS = {"base": POSITIONALS, "randpos": ["sinusoidal", "learned"]}
# As scripts/studies/experiments.py: 16 symbols, target 99%; sort with a cosine schedule.
COMMON = ["--vocab", "16", "--min-len", str(TRAIN_LENS[0]), "--max-len", str(TRAIN_LENS[1]),
          "--target", "0.99", "--positions", str(POSITIONS),
          "--init", "torch"]  # the grid was begun before gpt2 became the default; kept so its cells compare
COSINE = ["--schedule", "cosine", "--warmup", "100", "--lr", "2e-3"]
# task -> (optimisation args, eval every, step cap)
TASK_SETTINGS = {"copy": ([], 50, 2000), "reverse": ([], 50, 2000), "sort": (COSINE, 100, 3000)}

CSV_FIELDS = ["variant", "task", "model", "positional", "seed", "parameters", "solved_at_step", "steps",
              "heldout_exact", "train_seconds", "eval_len", "exact", "token_acc", "command"]


def cell_name(task, model, positional):
    return f"{task}-{model}-{positional}"


def train_args(variant, task, model, positional):
    opt, every, cap = TASK_SETTINGS[task]
    return (["--task", task] + COMMON + ["--model", model, "--positional", positional] + opt +
            ["--eval-every", str(every), "--steps", str(cap)] + VARIANTS[variant])


def run(cmd):
    return checked_child(cmd)[0]


def parse_eval(text):
    """(exact, token accuracy) as fractions from `attnlab eval`'s two percentage lines."""
    exact = re.search(r"^exact match\s+([0-9.]+)%", text, re.M)
    token = re.search(r"^token accuracy\s+([0-9.]+)%", text, re.M)
    if not exact or not token:
        raise RuntimeError(f"unexpected eval output: {text!r}")
    return float(exact.group(1)) / 100, float(token.group(1)) / 100


def same_run(stamped, shown, run_dir):
    """Whether a finished run was trained by `shown`. Runs stamped before the grid pinned --init torch were
    torch-initialised if their config.ini says so or has no init line (written before --init existed)."""
    if stamped == shown:
        return True
    if stamped != shown.replace(" --init torch", ""):
        return False
    with open(os.path.join(run_dir, "config.ini")) as f:
        inits = [line.split("=", 1)[1].strip() for line in f if line.split("=", 1)[0].strip() == "init"]
    return inits in ([], ["torch"])


def trained_cell(exe, runs_dir, variant, task, model, positional, seed, retrain):
    run_dir = os.path.join(runs_dir, variant, f"{cell_name(task, model, positional)}-s{seed}")
    args = train_args(variant, task, model, positional) + ["--seed", str(seed), "--threads", "1"]
    shown = "attnlab train " + " ".join(args)
    stamp = os.path.join(run_dir, "length_study_command.txt")
    summary = read_summary(run_dir)
    if retrain or summary is None or not os.path.exists(stamp) or not same_run(open(stamp).read().strip(), shown, run_dir):
        summary, _ = train(exe, run_dir, args)
        with open(stamp, "w") as f:
            f.write(shown + "\n")
    return run_dir, summary, shown


def study_cell(exe, runs_dir, variant, task, model, positional, seed, retrain):
    run_dir, s, shown = trained_cell(exe, runs_dir, variant, task, model, positional, seed, retrain)
    rows = []
    for n in EVAL_LENS:
        exact, token = parse_eval(run([exe, "eval", "--run", run_dir, "--len", str(n), "--threads", "1"]))
        rows.append({"variant": variant, "task": task, "model": model, "positional": positional, "seed": seed,
                     "parameters": s["parameters"], "solved_at_step": s["solved_at_step"] if s["solved_at_step"] > 0 else "",
                     "steps": s["steps"], "heldout_exact": s["heldout_exact"],
                     "train_seconds": round(s["seconds"], 1), "eval_len": n, "exact": exact, "token_acc": token,
                     "command": shown})
    return rows


def key(r):
    return r["variant"], r["task"], r["model"], r["positional"], str(r["seed"]), str(r["eval_len"])


def solved_step(r):
    """The step the run reached its target, or None (the CSV holds "" or -1 for never)."""
    v = r["solved_at_step"]
    return int(v) if v not in ("", None) and int(v) > 0 else None


def mean(values):
    return sum(values) / len(values)


def cells(rows, variant, model):
    """{(task, positional): {eval_len: [rows over seeds]}} for one variant and model."""
    out = {}
    for r in rows:
        if r["variant"] == variant and r["model"] == model:
            out.setdefault((r["task"], r["positional"]), {}).setdefault(int(r["eval_len"]), []).append(r)
    return out


def heatmap(rows, variant, model, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    c = cells(rows, variant, model)
    labels = [(t, p) for t in TASKS for p in POSITIONALS if (t, p) in c]
    if not labels:
        return False
    grid = [[mean([float(r["exact"]) for r in c[lab].get(n, [])]) if c[lab].get(n) else float("nan")
             for n in EVAL_LENS] for lab in labels]
    fig, ax = plt.subplots(figsize=(5.2, 0.38 * len(labels) + 1.4))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=7,
                    color="black" if v > 0.6 else "white")
    ax.set_xticks(range(len(EVAL_LENS)))
    ax.set_xticklabels([f"{n}" + ("*" if n <= TRAIN_LENS[1] else "") for n in EVAL_LENS])
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels([f"{t} / {p}" for t, p in labels], fontsize=8)
    ax.set_xlabel("evaluated input length (* = trained, 8-12)")
    seeds = sorted({int(r["seed"]) for lab in labels for rs in c[lab].values() for r in rs})
    ax.set_title(f"{model}, {variant}: held-out exact match % (seeds {','.join(map(str, seeds))}; "
                 "cell = mean)", fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def table(rows, variant, model):
    c = cells(rows, variant, model)
    head = ("| task | positional | solved in-distribution (step) | " +
            " | ".join(f"exact / token @{n}" for n in EVAL_LENS) + " |")
    out = [head, "|---|---|---|" + "---|" * len(EVAL_LENS)]
    for t in TASKS:
        for p in POSITIONALS:
            if (t, p) not in c:
                continue
            by_len = c[(t, p)]
            first = sorted(by_len[min(by_len)], key=lambda r: int(r["seed"]))
            solved = ", ".join(str(r["solved_at_step"]) if solved_step(r)
                               else f"no ({100 * float(r['heldout_exact']):.0f}% at {r['steps']})" for r in first)
            vals = []
            for n in EVAL_LENS:
                rs = by_len.get(n, [])
                if not rs:
                    vals.append("—")
                    continue
                per_seed = "/".join(f"{100 * float(r['exact']):.0f}" for r in sorted(rs, key=lambda r: int(r["seed"])))
                vals.append(f"{per_seed} / {100 * mean([float(r['token_acc']) for r in rs]):.0f}")
            out.append(f"| {t} | {p} | {solved} | " + " | ".join(vals) + " |")
    return "\n".join(out)


def write_outputs(rows, docs):
    figures = os.path.join(docs, "figures")
    os.makedirs(figures, exist_ok=True)
    md_path = os.path.join(docs, "length.md")
    text = open(md_path).read() if os.path.exists(md_path) else "# Length generalisation\n"
    stamp = datetime.date.today().isoformat()
    for variant in VARIANTS:
        for model in MODELS:
            name = f"length_{variant}_{model}"
            if heatmap(rows, variant, model, os.path.join(figures, name + ".png")):
                text = replace_block(text, name, f"_Generated by scripts/studies/length_study.py ({stamp}); exact match % "
                                     "per seed, then token accuracy % (mean over seeds)._\n\n" +
                                     table(rows, variant, model))
    with open(md_path, "w") as f:
        f.write(text)


def write_csv(path, rows):
    order = {v: i for i, v in enumerate(list(VARIANTS) + TASKS + MODELS + POSITIONALS)}
    rows.sort(key=lambda r: (order[r["variant"]], order[r["model"]], order[r["task"]], order[r["positional"]],
                             int(r["seed"]), int(r["eval_len"])))
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def jobs_of(args):
    jobs = []
    for variant in args.variant:
        for model in MODELS:
            for task in TASKS:
                for positional in VARIANT_POSITIONALS[variant]:
                    if args.only and cell_name(task, model, positional) not in args.only:
                        continue
                    jobs += [(variant, task, model, positional, seed) for seed in args.seeds]
    return jobs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"), help="the attnlab binary")
    p.add_argument("--variant", nargs="+", choices=list(VARIANTS), default=["base"])
    p.add_argument("--only", nargs="*", default=None, help="cells by name, task-model-positional (copy-decoder-rope)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--jobs", type=int, default=2, help="runs at a time, each on one thread")
    p.add_argument("--retrain", action="store_true", help="train again even where a finished run exists")
    p.add_argument("--figures-only", action="store_true", help="heatmaps and tables from the CSV; run nothing")
    add_places(p, "length")
    args = p.parse_args()
    csv_path = os.path.join(args.docs, "figures", "length_grid.csv")
    rows = read_csv(csv_path, missing_ok=True)
    if not args.figures_only:
        if not os.access(args.attnlab, os.X_OK):
            sys.exit(f"length_study: no attnlab binary at {args.attnlab}; build it or pass --attnlab")
        start = time.perf_counter()
        os.makedirs(os.path.dirname(csv_path), exist_ok=True)
        lock = threading.Lock()
        new = []

        def execute(job):
            out = study_cell(args.attnlab, args.runs, *job, args.retrain)
            r0 = out[0]
            solved = f"solved at {r0['solved_at_step']}" if solved_step(r0) else f"NOT solved by {r0['steps']}"
            print(f"{' '.join(map(str, job))}: {solved}; exact " +
                  " ".join(f"@{r['eval_len']} {100 * r['exact']:.0f}%" for r in out), flush=True)
            with lock:  # the CSV after every cell, so an interrupted study keeps what it measured
                new.extend(out)
                redone = {key(r) for r in out}
                rows[:] = [r for r in rows if key(r) not in redone] + out
                write_csv(csv_path, rows)

        run_pool(execute, jobs_of(args), args.jobs, "length_study")
        print(f"wrote {csv_path} ({len(new)} rows new) in {time.perf_counter() - start:.0f} s")
    write_outputs(rows, args.docs)


if __name__ == "__main__":
    main()
