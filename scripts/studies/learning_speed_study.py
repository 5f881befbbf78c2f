#!/usr/bin/env python3
"""Learning speed of attnlab's decoder against the PyTorch reference (scripts/studies/torch_gpt_reference.py).

GPT-nano setting: decoder, 3 layers, 3 heads, d = 48, d_ff = 4d, gelu, learned positions,
AdamW lr 5e-4, betas (0.9, 0.95), weight decay 0.1, clip 1, batch 64, constant lr, no dropout, on
  sort   length 6, 3 symbols (729 inputs; 182 of them, a quarter, held out)
  add    2 + 2 digits (10,000 inputs; 500 held out)
  adder  minGPT's 2-digit adder (data/pairs/adder2.tsv: a b -> the sum's digits lowest first; 500 held out,
         drawn per seed and by each implementation from its own generator)
  adder-mingpt  the same adder with minGPT's own test split (data/pairs/adder2_heldout.tsv, written by
         scripts/tools/make_data.py) as --heldout-file of both implementations: the same 500 held-out sums and
         the same 9,500 training sums for every seed and both
for attnlab --init torch, attnlab --init gpt2, and the reference with --init gpt2 (the GPT-2 scheme
well-known small GPTs use) and --init torch (to separate the initialisation from everything else),
each with the special-token layout ([bos] input [sep] answer [eos]); and attnlab and the reference
with --init gpt2 --layout bare (minGPT's layout: input then answer, loss on the answer only).
Every run gets the same flags, evaluates held-out exact match every 50 steps (sort) or 100 (add) and stops when
100% held for --patience consecutive evaluations (or at the step cap). From each run's evaluation
history this script takes steps to 100% and to 99%: the first step of `patience` consecutive
evaluations at or above the level (the rule of attnlab's --target-patience); and the first evaluation
at or above 50% (once), which marks the end of a plateau.

    /usr/bin/python3 scripts/studies/learning_speed_study.py                     # 2 tasks x 4 variants x seeds 0-2
    /usr/bin/python3 scripts/studies/learning_speed_study.py --jobs 2            # two runs at a time
    /usr/bin/python3 scripts/studies/learning_speed_study.py --only sort --variants attnlab-gpt2 --seeds 3
    /usr/bin/python3 scripts/studies/learning_speed_study.py --only adder --variants attnlab-gpt2 attnlab-gpt2-bare
    /usr/bin/python3 scripts/studies/learning_speed_study.py --only adder-mingpt --variants attnlab-gpt2-bare pytorch-gpt2-bare
    /usr/bin/python3 scripts/studies/learning_speed_study.py --tables-only       # the table from the CSV

Rows go to docs/learning_speed.csv (rows of experiments not rerun are kept; each row records the date and
the CPU, /proc/cpuinfo's model name, family and model, it ran on), the table to
docs/experiments.md between <!-- BEGIN learning-speed --> and <!-- END learning-speed -->; run
directories to runs/learning_speed/. One thread per run (attnlab --threads 1; torch.set_num_threads(1)
with OMP/OpenBLAS at 1 thread); runtime bounded by the step caps.
"""
import argparse
import datetime
import json
import os
import sys
import time

from attnlab_runs.files import held_step, heldout_curve, write_table
from attnlab_runs.launch import ROOT, checked_child, run_pool, train
from attnlab_runs.schema import solved_at
from attnlab_runs.study import add_places, cpu_kind, median, median_range, provenance, read_rows, replace_block

NANO = ["--model", "decoder", "--d-model", "48", "--heads", "3", "--layers", "3", "--d-ff", "192",
        "--activation", "gelu", "--positional", "learned", "--lr", "5e-4", "--beta1", "0.9", "--beta2", "0.95",
        "--weight-decay", "0.1", "--clip", "1", "--batch-size", "64", "--schedule", "constant"]
ADDER = os.path.join("data", "pairs", "adder2.tsv")
ADDER_HELDOUT = os.path.join("data", "pairs", "adder2_heldout.tsv")  # minGPT's test split of ADDER
SETTINGS = [  # name, task flags, step cap, evaluation every (steps), {implementation: its own task flags}
    ("sort", ["--task", "sort", "--vocab", "3", "--min-len", "6", "--max-len", "6", "--heldout", "182"], 3000, 50, {}),
    ("add", ["--task", "add", "--digits", "2", "--heldout", "500"], 10000, 100, {}),
    ("adder", ["--task", "pairs", "--file", ADDER], 10000, 100,
     {"attnlab": ["--tokenize", "chars", "--heldout-fraction", "0.05"], "pytorch": ["--heldout", "500"]}),
    ("adder-mingpt", ["--task", "pairs", "--file", ADDER, "--heldout-file", ADDER_HELDOUT], 10000, 100,
     {"attnlab": ["--tokenize", "chars"]}),
]
VARIANTS = [  # name, implementation, init, layout
    ("attnlab-torch", "attnlab", "torch", "special"), ("attnlab-gpt2", "attnlab", "gpt2", "special"),
    ("pytorch-gpt2", "pytorch", "gpt2", "special"), ("pytorch-torch", "pytorch", "torch", "special"),
    ("attnlab-gpt2-bare", "attnlab", "gpt2", "bare"), ("pytorch-gpt2-bare", "pytorch", "gpt2", "bare"),
]
CSV_FIELDS = ["setting", "variant", "implementation", "init", "layout", "seed", "parameters", "eval_every", "patience",
              "steps_to_100", "steps_to_99", "steps", "heldout_exact", "seconds", "cpu_seconds", "date", "cpu", "evals",
              "command"]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def task_flags_for(setting, impl):
    """The setting's task flags for one implementation: the shared ones, then that implementation's own."""
    return setting[1] + setting[4].get(impl, [])


def run_flags(task_flags, cap, init, layout, seed, every, patience):
    return task_flags + NANO + ["--init", init, "--layout", layout, "--eval-every", str(every), "--steps", str(cap),
                                "--target", "1", "--target-patience", str(patience), "--seed", str(seed), "--threads", "1"]


def run_attnlab(exe, flags, run_dir):
    s, cpu = train(exe, run_dir, flags)
    return {"parameters": s["parameters"], "steps": s["steps"], "heldout_exact": s["heldout_exact"],
            "seconds": round(s["seconds"], 2), "cpu_seconds": round(cpu, 2), "evals": heldout_curve(run_dir),
            "solved_at_step": solved_at(s),
            "command": "attnlab train " + " ".join(flags)}


def run_pytorch(flags):
    script = os.path.join(ROOT, "scripts", "studies", "torch_gpt_reference.py")
    env = dict(os.environ, **ONE_THREAD)
    out, _ = checked_child([sys.executable, script] + flags, env=env, shown=f"{script} {' '.join(flags)}")
    r = json.loads(out.strip().splitlines()[-1])
    return {k: r[k] for k in ("parameters", "steps", "heldout_exact", "seconds", "evals", "solved_at_step")} | {
        "cpu_seconds": r["cpu_seconds"], "command": "python3 scripts/studies/torch_gpt_reference.py " + " ".join(flags)}


def one_run(args, setting, variant, seed):
    name, _, cap, every, _ = setting
    vname, impl, init, layout = variant
    every = args.eval_every or every
    flags = run_flags(task_flags_for(setting, impl), cap, init, layout, seed, every, args.patience)
    if impl == "attnlab":
        r = run_attnlab(args.attnlab, flags, os.path.join(args.runs, f"{name}-{vname}-s{seed}"))
    else:
        r = run_pytorch(flags)
    to100 = held_step(r["evals"], 1.0, args.patience)
    if to100 != r["solved_at_step"]:  # the run's own stop and this script's reading must agree
        raise RuntimeError(f"{name} {vname} seed {seed}: solved at {r['solved_at_step']} by the run, "
                           f"{to100} from its evaluations")
    return {"setting": name, "variant": vname, "implementation": impl, "init": init, "layout": layout, "seed": seed,
            "parameters": r["parameters"], "eval_every": every, "patience": args.patience,
            "steps_to_100": to100, "steps_to_99": held_step(r["evals"], 0.99, args.patience), "steps": r["steps"],
            "heldout_exact": r["heldout_exact"], "seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"],
            "date": datetime.date.today().isoformat(), "cpu": cpu_kind(), "evals": json.dumps(r["evals"]),
            "command": r["command"]}


def fmt(steps, cap):
    return str(steps) if steps else f"not by {cap}"


def median_of(rows, key, cap):
    """rows[key] over the seeds as "median (range)": "2600 (2000–4200)"."""
    return median_range([r[key] for r in rows], cap)


def first_at_half(row):
    """The first evaluation step with held-out exact match >= 50% (once, no patience), else None."""
    return held_step(json.loads(row["evals"]) if isinstance(row["evals"], str) else row["evals"], 0.5, 1)


def table(rows):
    out = ["| setting | implementation | init | layout | parameters | steps to 100% (seeds) | median (range) | "
           "steps to 99% (seeds) | median (range) | first at 50%: median (range) | CPU s (median) | measured |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, _, cap, _, _ in SETTINGS:
        for vname, impl, init, layout in VARIANTS:
            rs = sorted((r for r in rows if r["setting"] == name and r["variant"] == vname), key=lambda r: r["seed"])
            if not rs:
                continue
            seeds = ", ".join(str(r["seed"]) for r in rs)
            out.append(f"| {name} | {impl} | {init} | {layout} | {rs[0]['parameters']:,} "
                       f"| {', '.join(fmt(r['steps_to_100'], cap) for r in rs)} ({seeds}) | {median_of(rs, 'steps_to_100', cap)} "
                       f"| {', '.join(fmt(r['steps_to_99'], cap) for r in rs)} | {median_of(rs, 'steps_to_99', cap)} "
                       f"| {median_range([first_at_half(r) for r in rs], cap)} "
                       f"| {median([r['cpu_seconds'] for r in rs]):.1f} | {provenance(rs)} |")
    return "\n".join(out)


def typed_rows(path):
    rows = read_rows(path, "learning_speed_study")
    for r in rows:
        r["layout"] = r.get("layout") or "special"  # rows written before --layout existed
        for k in ("seed", "parameters", "eval_every", "patience", "steps"):
            r[k] = int(r[k])
        for k in ("heldout_exact", "seconds", "cpu_seconds"):
            r[k] = float(r[k])
        for k in ("steps_to_100", "steps_to_99"):
            r[k] = int(r[k]) if r[k] else None
    return rows


def write_outputs(rows, docs):
    order = {n: i for i, (n, *_) in enumerate(SETTINGS)} | {n: i for i, (n, *_) in enumerate(VARIANTS)}
    rows = sorted(rows, key=lambda r: (order[r["setting"]], order[r["variant"]], r["seed"]))
    csv_path = os.path.join(docs, "learning_speed.csv")
    write_table(csv_path, CSV_FIELDS, rows)  # None written as an empty field
    md_path = os.path.join(docs, "experiments.md")
    with open(md_path) as f:
        text = f.read()
    stamp = datetime.date.today().isoformat()
    text = replace_block(text, "learning-speed", f"_Generated by scripts/studies/learning_speed_study.py ({stamp}) from "
                         "docs/learning_speed.csv; each row was measured on the date and CPU of its last column._\n\n"
                         + table(rows))
    with open(md_path + ".tmp", "w") as f:
        f.write(text)
    os.replace(md_path + ".tmp", md_path)
    return csv_path, md_path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"), help="the attnlab binary")
    p.add_argument("--only", nargs="*", choices=[s[0] for s in SETTINGS], help="settings to run (default: all)")
    p.add_argument("--variants", nargs="*", choices=[v[0] for v in VARIANTS], help="variants to run (default: all)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eval-every", type=int, default=0, help="evaluation cadence; 0 = the setting's (sort 50, add 100)")
    p.add_argument("--patience", type=int, default=3, help="consecutive evaluations a level must hold")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (each on one thread); at most 2 here")
    p.add_argument("--tables-only", action="store_true", help="rewrite the table from the CSV; run nothing")
    add_places(p, "learning_speed")
    args = p.parse_args()
    if args.eval_every < 0 or args.patience < 1 or args.jobs < 1:
        sys.exit(f"learning_speed_study: --eval-every must be >= 0, --patience and --jobs >= 1, got "
                 f"{args.eval_every}, {args.patience}, {args.jobs}")
    wanted = [v for v in VARIANTS if not args.variants or v[0] in args.variants]
    if not args.tables_only and any(v[1] == "attnlab" for v in wanted) and not os.access(args.attnlab, os.X_OK):
        sys.exit(f"learning_speed_study: no attnlab binary at {args.attnlab}; build it or pass --attnlab")
    jobs = [] if args.tables_only else [
        (s, v, seed) for s in SETTINGS if not args.only or s[0] in args.only for seed in args.seeds for v in wanted]
    csv_path = os.path.join(args.docs, "learning_speed.csv")
    kept = typed_rows(csv_path)  # read (and checked) before an hour of runs, not after
    os.makedirs(args.runs, exist_ok=True)
    start = time.perf_counter()

    def execute(job):
        r = one_run(args, *job)
        print(f"{r['setting']:5} {r['variant']:14} seed {r['seed']}: 100% at {r['steps_to_100']}, "
              f"99% at {r['steps_to_99']} ({r['steps']} steps, {r['cpu_seconds']:.1f} s CPU)", flush=True)
        return r

    new = run_pool(execute, jobs, args.jobs, "learning_speed_study")

    def key(r):
        return r["setting"], r["variant"], r["seed"]

    rerun = {key(r) for r in new}
    rows = [r for r in kept if key(r) not in rerun] + new
    csv_path, md_path = write_outputs(rows, args.docs)
    print(f"wrote {csv_path} and {md_path} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
