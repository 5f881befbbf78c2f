#!/usr/bin/python3
"""The measured comparison of docs/tuning.md: grid search, random search and TPE with median pruning
on minGPT's 2-digit adder (data/pairs/adder2.tsv, decoder), each repeated with study seeds 0, 1, 2,
all through scripts/tools/tune.py with --objective steps --target 1 (held-out exact match 100%).

usage: scripts/studies/tuning_study.py [--out runs/tuning] [--attnlab PATH] [--reps 3] [--trials 40] [--summary-only]

Each study lives in OUT/<method>-<seed> (rerunning resumes or reuses it; a larger --trials extends
the random and TPE studies, the grid has its 16 points). At the end, per study and as the median of
the repetitions, after the first 16 trials and after all of them: trials run, their CPU-seconds,
CPU-seconds spent until a trial first reached the target, the best steps-to-solve found, and
CPU-seconds until a trial first matched the grid's best steps-to-solve. The CPU-seconds of a trial
are its runs' (the tuner's own are not counted); trials are taken in the order they ended (one trial
at a time: the order they ran). Then, from the random studies' trials, how often each value of each
setting solved the task. Last, each method's best configuration trained again with seeds 1 and 2
(the studies train with seed 0): is its steps-to-solve the configuration's or the seed's?
"""
import argparse
import os
import statistics
import subprocess
import sys

import optuna

from attnlab_runs.files import read_summary
from attnlab_runs.launch import ROOT, default_exe, train
from attnlab_runs.flags import train_flags

TASK = ["--task", "pairs", "--file", os.path.join("data", "pairs", "adder2.tsv"), "--tokenize", "chars",
        "--model", "decoder", "--heads", "4", "--batch-size", "64", "--heldout-fraction", "0.05", "--steps", "2500",
        "--eval-every", "100"]
# What a user would write for a grid: two learning rates, two widths, one or two layers, two encodings.
GRID = ["--param", "lr=cat:0.001,0.003", "--param", "d-model=cat:32,64", "--param", "layers=cat:1,2",
        "--param", "positional=cat:sinusoidal,learned"]
# The space random search and TPE sample: the grid's axes as ranges, plus warmup and the initialisation.
SPACE = ["--param", "lr=log:3e-4:1e-2", "--param", "warmup=int:0:300", "--param", "d-model=cat:32,64",
         "--param", "layers=int:1:3", "--param", "init=cat:torch,gpt2", "--param", "positional=cat:sinusoidal,learned,rope"]
METHODS = {  # name: tune.py flags
    "grid": ["--sampler", "grid", "--pruner", "none"] + GRID,
    "random": ["--sampler", "random", "--pruner", "none"] + SPACE,
    "tpe": ["--sampler", "tpe", "--pruner", "median"] + SPACE,
}
GRID_POINTS = 16


def study_dir(out, method, rep):
    return os.path.join(out, f"{method}-{rep}")


def run_study(args, method, rep):
    flags, trials = METHODS[method], GRID_POINTS if method == "grid" else args.trials
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "tools", "tune.py"), "--out", study_dir(args.out, method, rep),
           "--attnlab", args.attnlab, "--objective", "steps", "--target", "1", "--trials", str(trials), "--study-seed", str(rep)]
    print("$ " + " ".join(cmd + flags + ["--"] + TASK), flush=True)
    subprocess.run(cmd + flags + ["--"] + TASK, check=True)


def load(path):
    return optuna.load_study(study_name="tune", storage="sqlite:///" + os.path.abspath(os.path.join(path, "study.db")))


def figures(path, limit):
    """One study's figures over its first `limit` trials, from its storage, in the order they ended."""
    trials = sorted((t for t in load(path).get_trials() if t.state.is_finished() and "cpu_seconds" in t.user_attrs),
                    key=lambda t: t.datetime_complete)[:limit]
    cpu, first, best, timeline = 0.0, None, None, []
    for t in trials:
        cpu += t.user_attrs["cpu_seconds"]
        solved = t.state == optuna.trial.TrialState.COMPLETE and min(t.user_attrs.get("solved", [-1])) >= 0
        if solved:
            first = cpu if first is None else first
            best = t.value if best is None else min(best, t.value)
            timeline.append((cpu, t.value))
    return {"trials": len(trials), "cpu": cpu, "first": first, "best": best, "timeline": timeline,
            "pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in trials)}


def cpu_to_reach(timeline, goal):
    return next((cpu for cpu, value in timeline if value <= goal), None)


def fmt(v, digits=0):
    return "-" if v is None else f"{v:.{digits}f}"


def summarise(args, limit):
    rows = {m: [figures(study_dir(args.out, m, r), limit) for r in range(args.reps)] for m in METHODS}
    grid_best = min(f["best"] for f in rows["grid"] if f["best"] is not None)
    print(f"after at most {limit} trials; grid's best steps-to-solve: {grid_best:.0f}")
    print("method  seed  trials  pruned  CPU-s total  CPU-s to first solve  best steps  CPU-s to reach grid's best")
    for m, fs in rows.items():
        for r, f in enumerate(fs):
            print(f"{m:>6}  {r:>4}  {f['trials']:>6}  {f['pruned']:>6}  {fmt(f['cpu']):>11}  {fmt(f['first']):>20}  "
                  f"{fmt(f['best']):>10}  {fmt(cpu_to_reach(f['timeline'], grid_best)):>26}")
    print("medians of the repetitions (a study that never got there counts as its total):")
    for m, fs in rows.items():
        med = lambda key: statistics.median(f[key] if f[key] is not None else f["cpu"] for f in fs)  # noqa: E731
        reach = statistics.median(cpu_to_reach(f["timeline"], grid_best) or f["cpu"] for f in fs)
        best = statistics.median(f["best"] if f["best"] is not None else float("inf") for f in fs)
        print(f"{m:>6}  CPU-s total {med('cpu'):.0f}, to first solve {med('first'):.0f}, best steps {best:.0f}, "
              f"to reach the grid's best {reach:.0f}")


def breakdown(args):
    """Over the random studies' trials (a uniform sample of the space): per value of each setting,
    how many trials reached the target and their median steps-to-solve."""
    trials = [t for r in range(args.reps) for t in load(study_dir(args.out, "random", r)).get_trials()
              if t.state == optuna.trial.TrialState.COMPLETE]
    print(f"random search's {len(trials)} trials, per setting: solved / trials, median steps-to-solve of the solved")
    for name, bins in (("positional", None), ("layers", None), ("d-model", None), ("init", None),
                       ("lr", [3e-4, 1e-3, 3e-3, 1e-2]), ("warmup", [0, 100, 200, 301])):
        groups = {}
        for t in trials:
            v = t.params[name]
            if bins:
                i = max(i for i, b in enumerate(bins[:-1]) if v >= b)
                v = f"{bins[i]:g}..{bins[i + 1]:g}"
            groups.setdefault(v, []).append(t)
        cells = []
        for v, ts in sorted(groups.items(), key=lambda kv: str(kv[0])):
            solved = [t.value for t in ts if min(t.user_attrs["solved"]) >= 0]
            med = f", {statistics.median(solved):.0f}" if solved else ""
            cells.append(f"{v}: {len(solved)}/{len(ts)}{med}")
        print(f"  {name:>10}  " + "; ".join(cells))


def check_seeds(args):
    """Each method's best configuration (over its repetitions) trained with seeds 1 and 2."""
    print("best configurations, steps-to-solve with seed 0 (the study's), 1 and 2:")
    for m in METHODS:
        rep, best = min(((r, load(study_dir(args.out, m, r)).best_trial) for r in range(args.reps)),
                        key=lambda rb: rb[1].value)
        flags = train_flags(best.params)
        steps = [best.user_attrs["solved"][0]]
        for seed in (1, 2):
            run = os.path.join(args.out, "seeds", f"{m}-{rep}-trial{best.number:04d}-seed{seed}")
            os.makedirs(os.path.dirname(run), exist_ok=True)
            summary = read_summary(run)  # trained by an earlier call
            if summary is None:
                summary, _ = train(args.attnlab, run, ["--threads", "1", "--seed", str(seed), "--target", "1"] + flags + TASK)
            steps.append(summary["solved_at_step"])
        print(f"{m:>6}  {' '.join(flags)}: {', '.join(str(x) for x in steps)} (-1: not solved in 2500)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join("runs", "tuning"))
    ap.add_argument("--attnlab", default=default_exe())
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trials", type=int, default=40, help="trials of each random and TPE study (the grid: 16)")
    ap.add_argument("--summary-only", action="store_true", help="print the figures of the studies in OUT, run nothing")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not args.summary_only:
        for rep in range(args.reps):
            for m in METHODS:
                run_study(args, m, rep)
    for limit in sorted({GRID_POINTS, args.trials}):
        summarise(args, limit)
    breakdown(args)
    check_seeds(args)


if __name__ == "__main__":
    main()
