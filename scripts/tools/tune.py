#!/usr/bin/python3
"""Hyperparameter search over `attnlab train` flags with Optuna: adaptive sampling, pruning of losing
trials from their held-out rows, seeds, resumable and shared by many workers (docs/tuning.md).

usage: scripts/tools/tune.py --out DIR --param NAME=KIND:... [--param ...] [options] [-- fixed train flags]

  --param lr=log:1e-4:1e-2 --param layers=int:1:4 --param positional=cat:sinusoidal,learned,rope
  --objective exact|loss|steps   held-out exact match at the end (maximised), held-out loss (minimised),
                                 or the step reaching --target (minimised); scripts/tools/tune_trial.py says how
  --target F                     passed to every run as --target F (required by --objective steps)
  --sampler tpe|random|grid      (grid: every --param a cat: list or an int: range)
  --pruner median|halving|hyperband|none
  --trials N, --cpu-budget S     no new trial once N trials have ended, or their runs have used S CPU-seconds
  --seeds N                      every configuration trained with seeds 0..N-1 (or --seed's value and up);
                                 the objective is their median, the spread (max - min) is reported
  --jobs J                       trials at a time in this worker (each run single-threaded unless the
                                 flags after -- say --threads)
  --study-seed S                 the sampler's seed
  --storage URL                  default sqlite:///DIR/study.db; journal:PATH for Optuna's journal file
                                 (workers on a shared filesystem), or any database URL SQLAlchemy accepts
  --report                       print the results of DIR's study and exit (also while workers run)

Before anything runs, attnlab itself checks the flags after -- with each value of every --param
(`attnlab train --check`: an unknown flag or --param name, --target 2, a value out of range) and that
--objective loss trains a language model (--task text); a refusal is one line, exit 2.
DIR belongs to the study by the rule attnlab applies (`attnlab claim-dir --kind study`): a missing or
empty DIR is created and marked (.attnlab-study), one marked so is continued, anything else (a
directory of yours, a run directory, a sweep, a file, a symbolic link as DIR or inside it) is refused.
Each trial's runs are ordinary run directories DIR/trial0007 (DIR/trial0007-seed1, ... with --seeds),
never replaced: --overwrite after -- is dropped, and a trial whose directory exists fails with attnlab's
refusal. At the end: the trials table, DIR/summary.csv (read by `attnlab report DIR`), the best
configuration as a command line, and the parameters' importances. Ctrl-C (or SIGTERM) stops the running
trials' runs (each checkpoints), records them as interrupted, and queues their configurations again:
the same command resumes the study, and a queued configuration resumes its run (train --resume) from
its checkpoint. `mpirun -np N scripts/tools/tune.py ...` makes each rank a worker on the same study (a
refusal is printed by rank 0 alone); so does the same command started on several machines with a
shared --storage. Each worker seeds its sampler from --study-seed and an identity of its own, so
workers never propose the same values (the worker that creates the study uses --study-seed itself).
Exit codes: 0 done, 2 bad arguments (or a file the tuner cannot write), 130 interrupted.
"""
import argparse
import sys

from attnlab_runs.flags import default_flags, flag_names, flag_value, format_value, without_flag
from attnlab_runs.launch import check_train_flags, default_exe, require_attnlab
from attnlab_runs.tool import OneLineParser, refuse, split_at_dashes
from tune_space import ParamError, parse_space


def fail(message):
    refuse("tune", message)


def parse_args(argv):
    argv, fixed = split_at_dashes(argv)
    ap = OneLineParser(prog="tune.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--objective", choices=["exact", "loss", "steps"], default="exact")
    ap.add_argument("--target", type=float)
    ap.add_argument("--sampler", choices=["tpe", "random", "grid"], default="tpe")
    ap.add_argument("--pruner", choices=["median", "halving", "hyperband", "none"], default="median")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--cpu-budget", type=float)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--study-seed", type=int)
    ap.add_argument("--storage")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--attnlab", default=default_exe())
    args = ap.parse_args(argv)
    args.fixed = [a for a in fixed if a != "--overwrite"]  # a trial's run is never replaced
    return args


def check_args(args):
    """Everything a worker can refuse before any run starts: one line, exit 2."""
    if args.out == "":
        fail("--out needs a path, got an empty one")
    try:
        args.space = parse_space(args.param)
    except ParamError as e:
        fail(str(e))
    if not args.space:
        fail("give at least one --param NAME=KIND:...")
    for name, value in (("--trials", args.trials), ("--seeds", args.seeds), ("--jobs", args.jobs)):
        if value < 1:
            fail(f"{name} must be at least 1, got {value}")
    if args.cpu_budget is not None and args.cpu_budget <= 0:
        fail(f"--cpu-budget must be positive, got {args.cpu_budget}")
    names = flag_names(args.fixed)
    for own in ("run", "resume"):
        if own in names:
            fail(f"--{own} cannot be given after --: each trial trains in its own DIR/trialNNNN")
    for p in args.space:
        if p.name in names or p.name in ("run", "resume", "target"):
            fail(f"--param {p.name} is also given after -- (or is the tuner's own); give it once")
        if p.name == "seed" and args.seeds > 1:
            fail("--param seed and --seeds N both choose seeds; give one")
    if args.target is not None:
        if "target" in names:
            fail("--target is given both to the tuner and after --; give it once")
        args.fixed += ["--target", f"{args.target:g}"]
    elif args.objective == "steps":
        fail("--objective steps needs --target (the held-out exact match a run must reach)")
    if args.sampler == "grid":
        try:
            args.grid = {p.name: p.grid_values() for p in args.space}
        except ParamError as e:
            fail(str(e))
    args.base_seed = 0
    if "seed" in names:  # --seed S or --seed=S: with --seeds N, the seeds are S..S+N-1
        value = flag_value(args.fixed, "seed")
        try:
            args.base_seed = int(value)
        except (TypeError, ValueError):
            fail(f"--seed after -- must be an integer, got '{value}'")
        if args.seeds > 1:
            args.fixed = without_flag(args.fixed, "seed")


def check_with_attnlab(args):
    """attnlab's own check (train --check, which writes nothing) of the flags after -- with each value of
    every --param (a categorical's every value, a range's two ends as they would be passed), before the
    first trial: a refusal is one line naming the value, and nothing runs."""
    require_attnlab("tune", args.attnlab)
    base = default_flags(args.fixed, [p.name for p in args.space]) + args.fixed
    alone, _ = check_train_flags(args.attnlab, base)
    for p in args.space:
        for value in p.check_values():
            refusal, _ = check_train_flags(args.attnlab, base + [f"--{p.name}", format_value(value)])
            if refusal is not None:
                if refusal == alone:
                    fail(f"the flags after -- are refused: {refusal}")
                fail(f"--param {p.spec()}: the value {format_value(value)} (with the flags after --) is refused: {refusal}")


def main():
    args = parse_args(sys.argv[1:])
    check_args(args)  # before Optuna loads (seconds): a refusal is immediate
    try:
        if not args.report:
            check_with_attnlab(args)
        import tune_study  # Optuna loads here (seconds)
        try:
            tune_study.main(args)
        except tune_study.Refused as e:
            fail(str(e))
    except OSError as e:  # a full disk, a directory that became unwritable: one line, never a traceback
        fail(f"cannot write {e.filename or 'a file'}: {e.strerror}")
    except KeyboardInterrupt:  # Ctrl-C before the worker answers it (Optuna loading): nothing ran
        print("tune: interrupted before the first trial", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
