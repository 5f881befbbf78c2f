#!/usr/bin/env python3
"""The experiments of docs/experiments.md, rerunnable: trains every task/model
pair to its held-out target with attnlab, and compares attnlab with a PyTorch
implementation on docs/benchmark.md's S configuration (steps to 99% on reverse).

    /usr/bin/python3 scripts/studies/experiments.py                 # everything (about 15 min on a quiet core)
    /usr/bin/python3 scripts/studies/experiments.py --part tasks    # only the task table
    /usr/bin/python3 scripts/studies/experiments.py --part s --s-seeds 0 1 2
    /usr/bin/python3 scripts/studies/experiments.py --part init --jobs 2   # which --init beside which positions
    /usr/bin/python3 scripts/studies/experiments.py --only sort-encoder --seeds 0
    /usr/bin/python3 scripts/studies/experiments.py --tables-only    # the tables from docs/experiments.csv

Writes docs/experiments.csv (one row per run) and regenerates the tables of
docs/experiments.md between its `<!-- BEGIN name -->` / `<!-- END name -->`
markers (the prose around them is kept). Run directories go under
runs/experiments/ (replaced on every run). Everything runs on one thread
(attnlab --threads 1, torch.set_num_threads(1)), one run at a time.

Runtime is bounded: every run has a step cap (--steps) and stops at its target;
the caps below times the slowest per-step cost seen bound the total.
"""
import argparse
import datetime
import json
import os
import sys
import time

from attnlab_runs.files import write_table
from attnlab_runs.launch import ROOT, checked_child, run_pool, train
from attnlab_runs.schema import solved_at
from attnlab_runs.study import add_places, cpu_kind, median, median_range, provenance, read_rows, replace_block

# Task suite: length 16, 16 task symbols (V = 20 with the 4 specials); add with
# 3 + 3 digits. Every model is small (d 64, h 4, d_ff 256; L 2 per stack).
# Hyperparameters found by hand (docs/experiments.md says how); the step cap is
# a give-up point, well above the steps the runs need.
SEQ = ["--vocab", "16", "--min-len", "16", "--max-len", "16", "--target", "0.99"]
COSINE = ["--schedule", "cosine", "--warmup", "100", "--lr", "2e-3"]
TASKS = [
    # name, task args, model args, optimisation args, eval every, step cap
    ("copy-encoder", ["--task", "copy"] + SEQ, ["--model", "encoder"], [], 50, 1000),
    ("reverse-encoder", ["--task", "reverse"] + SEQ, ["--model", "encoder"], [], 50, 1000),
    ("sort-encoder", ["--task", "sort"] + SEQ, ["--model", "encoder"], COSINE, 100, 3000),
    ("copy-decoder", ["--task", "copy"] + SEQ, ["--model", "decoder"], [], 50, 1000),
    ("reverse-decoder", ["--task", "reverse"] + SEQ, ["--model", "decoder"], [], 50, 1000),
    ("sort-decoder", ["--task", "sort"] + SEQ, ["--model", "decoder"], COSINE, 100, 2000),
    ("copy-seq2seq", ["--task", "copy"] + SEQ, ["--model", "seq2seq"], [], 50, 1000),
    ("reverse-seq2seq", ["--task", "reverse"] + SEQ, ["--model", "seq2seq"], [], 50, 1000),
    ("sort-seq2seq", ["--task", "sort"] + SEQ, ["--model", "seq2seq"], COSINE, 100, 2000),
    ("add-decoder", ["--task", "add", "--digits", "3", "--target", "0.95"], ["--model", "decoder", "--layers", "3"],
     COSINE, 100, 4000),
]

# docs/benchmark.md's S configuration with the PyTorch reference's hyperparameters.
# --vocab 12: attnlab's V = 4 specials + 12 symbols = 16.
S_ARGS = ["--task", "reverse", "--vocab", "12", "--min-len", "16", "--max-len", "16", "--model", "encoder",
          "--d-model", "64", "--heads", "4", "--layers", "2", "--d-ff", "256", "--batch-size", "64",
          "--lr", "1e-3", "--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-8", "--weight-decay", "0.01",
          "--schedule", "constant", "--clip", "0", "--norm", "pre", "--positional", "sinusoidal",
          "--dropout", "0", "--init", "torch", "--target", "0.99", "--heldout", "500"]
S_EVAL_EVERY, S_STEP_CAP = 10, 3000

# The initialisation study: the task table's encoder and decoder runs with each
# scheme beside sinusoidal and learned positions (--init auto's choice comes from it).
INIT_TASKS = ["copy-encoder", "reverse-encoder", "sort-encoder", "copy-decoder", "reverse-decoder", "sort-decoder"]
INIT_POSITIONALS = ["sinusoidal", "learned"]
INIT_SCHEMES = ["torch", "gpt2"]

CSV_FIELDS = ["part", "experiment", "implementation", "task", "model", "seed", "parameters", "target",
              "solved_at_step", "steps", "heldout_exact", "seconds", "cpu_seconds", "date", "cpu", "command"]


def run_attnlab(exe, name, args, seed, runs_dir):
    s, cpu = train(exe, os.path.join(runs_dir, f"{name}-s{seed}"), args + ["--seed", str(seed), "--threads", "1"])
    shown = ["attnlab", "train"] + args + ["--seed", str(seed), "--threads", "1"]
    return {"implementation": "attnlab", "task": s["task"], "model": s["model"], "seed": seed,
            "parameters": s["parameters"], "target": s["target"], "solved_at_step": solved_at(s), "steps": s["steps"],
            "heldout_exact": s["heldout_exact"], "seconds": round(s["seconds"], 2), "cpu_seconds": round(cpu, 2),
            "command": " ".join(shown)}


def run_torch(seed):
    script = os.path.join(ROOT, "scripts", "pytorch", "torch_train_reverse.py")
    flags = ["--seeds", str(seed), "--eval-every", str(S_EVAL_EVERY), "--steps", str(S_STEP_CAP),
             "--target", "0.99", "--heldout", "500", "--threads", "1"]
    out, _ = checked_child([sys.executable, script] + flags, shown=f"{script} {' '.join(flags)}")
    r = json.loads(out.strip().splitlines()[-1])
    # The script's own wall and CPU time cover its training loop, not Python's start and torch's import.
    return {"implementation": "pytorch", "task": "reverse", "model": "encoder", "seed": seed,
            "parameters": r["parameters"], "target": 0.99, "solved_at_step": r["solved_at_step"],
            "steps": r["steps"], "heldout_exact": r["heldout_exact"], "seconds": r["seconds"],
            "cpu_seconds": r["cpu_seconds"], "command": "python3 scripts/pytorch/torch_train_reverse.py " + " ".join(flags)}


def fmt_steps(rows):
    return ", ".join(str(r["solved_at_step"]) if r["solved_at_step"] else f"not by {r['steps']}" for r in rows)


def tasks_table(rows):
    out = ["| task | model | parameters | settings (beyond the defaults) | target | steps to target (per seed) "
           "| median (range) | seconds, wall (median) | seconds, CPU (median) | solved |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for name, task_args, model_args, opt_args, every, cap in TASKS:
        rs = [r for r in rows if r["experiment"] == name]
        if not rs:
            continue
        solved = sum(1 for r in rs if r["solved_at_step"])
        settings = " ".join(model_args[2:] + opt_args + ["--eval-every", str(every), "--steps", str(cap)])
        out.append(f"| {rs[0]['task']} | {rs[0]['model']} | {rs[0]['parameters']:,} | `{settings}` "
                   f"| {float(rs[0]['target']):.0%} | {fmt_steps(rs)} "
                   f"| {median_range([r['solved_at_step'] for r in rs], cap)} | {median([r['seconds'] for r in rs]):.1f} "
                   f"| {median([r['cpu_seconds'] for r in rs]):.1f} | {solved}/{len(rs)} |")
    return "\n".join(out)


def init_table(rows):
    cells = [(p, i) for p in INIT_POSITIONALS for i in INIT_SCHEMES]
    auto = {"sinusoidal": "torch", "learned": "gpt2"}
    out = ["| task | model | " + " | ".join(f"{p}, --init {i}{' (auto)' if auto[p] == i else ''}" for p, i in cells) +
           " |", "|---|---|" + "---|" * len(cells)]
    caps = {name: cap for name, *_rest, cap in TASKS}
    for name in INIT_TASKS:
        line = []
        for p, i in cells:
            rs = [r for r in rows if r["experiment"] == f"{name}-{p}-{i}"]
            line.append(f"{fmt_steps(rs)}: {median_range([r['solved_at_step'] for r in rs], caps[name])}" if rs else "—")
        if any(c != "—" for c in line):
            task, model = name.split("-")
            out.append(f"| {task} | {model} | " + " | ".join(line) + " |")
    return "\n".join(out)


def s_table(rows):
    out = ["| implementation | parameters | weight decay on | steps to 99% (per seed) | median / mean / range "
           "| seconds, wall (per seed) | seconds, CPU (per seed) |",
           "|---|---|---|---|---|---|---|"]
    for impl in ("attnlab", "pytorch"):
        rs = [r for r in rows if r["implementation"] == impl]
        if not rs:
            continue
        steps = [r["solved_at_step"] for r in rs if r["solved_at_step"]]
        if len(steps) == len(rs):
            summary = f"{median(steps):g} / {sum(steps) / len(steps):.1f} / {min(steps)}–{max(steps)}"
        else:
            summary = f"{len(rs) - len(steps)} of {len(rs)} not solved"
        wall = ", ".join(f"{r['seconds']:.1f}" for r in rs)
        cpu = ", ".join(f"{r['cpu_seconds']:.1f}" for r in rs)
        out.append(f"| {impl} | {rs[0]['parameters']:,} | weights only (no biases, LayerNorm, embeddings) "
                   f"| {fmt_steps(rs)} | {summary} | {wall} | {cpu} |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"), help="the attnlab binary")
    p.add_argument("--part", choices=["all", "tasks", "s", "init"], default="all")
    p.add_argument("--only", nargs="*", default=None, help="task experiments by name (e.g. sort-encoder)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the task runs")
    p.add_argument("--s-seeds", type=int, nargs="+", default=list(range(10)), help="seeds of the S comparison")
    p.add_argument("--jobs", type=int, default=1,
                   help="runs at a time (each on one thread); >1 adds contention to the timings")
    p.add_argument("--tables-only", action="store_true", help="rewrite the tables from docs/experiments.csv; run nothing")
    add_places(p, "experiments")
    args = p.parse_args()
    if not args.tables_only and not os.access(args.attnlab, os.X_OK):
        sys.exit(f"experiments: no attnlab binary at {args.attnlab}; build it (scripts/build.sh) or pass --attnlab")
    os.makedirs(args.runs, exist_ok=True)

    csv_path = os.path.join(args.docs, "experiments.csv")
    old = read_rows(csv_path, "experiments")  # checked before the runs, not after them
    jobs = []  # (part, experiment, function, arguments), in the order of the tables
    if args.tables_only:
        pass
    elif args.part in ("all", "tasks"):
        for name, task_args, model_args, opt_args, every, cap in TASKS:
            if args.only and name not in args.only:
                continue
            a = task_args + model_args + opt_args + ["--eval-every", str(every), "--steps", str(cap)]
            jobs += [("tasks", name, run_attnlab, (args.attnlab, name, a, seed, args.runs)) for seed in args.seeds]
    if args.part in ("all", "init") and not args.tables_only:
        for name, task_args, model_args, opt_args, every, cap in TASKS:
            if name not in INIT_TASKS or (args.only and name not in args.only):
                continue
            for p in INIT_POSITIONALS:
                for i in INIT_SCHEMES:
                    a = task_args + model_args + opt_args + ["--positional", p, "--init", i, "--eval-every", str(every),
                                                             "--steps", str(cap)]
                    jobs += [("init", f"{name}-{p}-{i}", run_attnlab, (args.attnlab, f"{name}-{p}-{i}", a, seed,
                                                                       args.runs)) for seed in args.seeds]
    if args.part in ("all", "s") and not args.tables_only:
        s_args = S_ARGS + ["--eval-every", str(S_EVAL_EVERY), "--steps", str(S_STEP_CAP)]
        for seed in args.s_seeds:  # interleaved, so that both implementations see the same machine load
            jobs.append(("s", "S-reverse", run_attnlab, (args.attnlab, "S-reverse", s_args, seed, args.runs)))
            jobs.append(("s", "S-reverse", run_torch, (seed,)))

    start = time.perf_counter()

    def execute(job):
        part, name, fn, fn_args = job
        r = dict(fn(*fn_args), part=part, experiment=name, date=datetime.date.today().isoformat(), cpu=cpu_kind())
        print(f"{part:5} {name:16} {r['implementation']:8} seed {r['seed']}: "
              f"{'solved at step ' + str(r['solved_at_step']) if r['solved_at_step'] else 'NOT solved'} "
              f"(held-out {float(r['heldout_exact']):.1%}, {r['seconds']:.1f} s wall, {r['cpu_seconds']:.1f} s CPU)",
              flush=True)
        return r

    rows = run_pool(execute, jobs, args.jobs, "experiments")

    # Keep the rows (experiment, implementation, seed) not rerun this time.
    def key(r):
        return r["part"], r["experiment"], r["implementation"], str(r["seed"])

    rerun = {key(r) for r in rows}
    kept = [r for r in old if key(r) not in rerun]
    for r in kept:
        for k in ("seed", "parameters", "steps"):
            r[k] = int(r[k])
        for k in ("target", "heldout_exact", "seconds", "cpu_seconds"):
            r[k] = float(r[k])
        r["solved_at_step"] = int(r["solved_at_step"]) if r["solved_at_step"] else None
    all_rows = kept + rows
    order = {name: i for i, (name, *_rest) in enumerate(TASKS)}
    parts = {"tasks": 0, "init": 1, "s": 2}
    all_rows.sort(key=lambda r: (parts[r["part"]], order.get(r["experiment"], 99), r["experiment"],
                                 r["implementation"], int(r["seed"])))
    os.makedirs(args.docs, exist_ok=True)
    write_table(csv_path, CSV_FIELDS, all_rows)  # None written as an empty field

    md_path = os.path.join(args.docs, "experiments.md")
    text = open(md_path).read() if os.path.exists(md_path) else "# Experiments\n"
    stamp = datetime.date.today().isoformat()
    for block, part, make in (("tasks", "tasks", tasks_table), ("init-study", "init", init_table),
                              ("s-compare", "s", s_table)):
        rs = [r for r in all_rows if r["part"] == part]
        text = replace_block(text, block, f"_Generated by scripts/studies/experiments.py ({stamp}) from runs of "
                             f"{provenance(rs)}._\n\n" + make(rs))
    with open(md_path, "w") as f:
        f.write(text)
    print(f"wrote {csv_path} and {md_path} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
