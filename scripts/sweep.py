#!/usr/bin/python3
"""A hyperparameter sweep over a grid of `attnlab train` flags.

usage: scripts/sweep.py --out DIR [--jobs N] [--attnlab PATH]
                        --grid lr=1e-3,3e-3 --grid warmup=0,100 --grid layers=1,2
                        [-- any other train flags, shared by every run]

Each run gets --run DIR/<name> --overwrite, and --quiet --threads 1 unless the
flags after -- set --quiet or --threads themselves (theirs win). --run, --resume
and a flag that is also a --grid axis are refused up front: each point has its
own run directory and its own value.

Every combination of the --grid values is one run (directory DIR/<name>, with
the flag values in its name), run in parallel up to --jobs at a time, each
single-threaded. At the end one table, printed and written to DIR/summary.csv:
the point's run name, the grid values, final held-out exact match and token accuracy, the step at
which --target was reached (-1: never), steps run, seconds, CPU-seconds (of the runs this
sweep started), exit code.
Runs already finished (summary.json present) are not run again, so an
interrupted sweep can be continued with the same command.

Across processes (and machines): `mpirun -np N scripts/sweep.py ...` deals the
grid points to the N ranks in turn (point i to rank i mod N), each rank running
its share --jobs at a time; every point writes DIR/<name>.result.json, and rank
0 alone waits for all of them, prints the table and writes summary.csv and
summary.png (held-out exact match per point, when matplotlib is installed). A
failed point is a row with its exit code, not the end of the sweep. The ranks
need no MPI library (they only read the launcher's rank variables), and the
runs they start are single processes.
"""
import argparse
import itertools
import json
import os
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from attnlab_runs import (Run, default_exe, default_flags, flag_names, job_id, last_line,
                          launcher_rank_size, print_table, read_summary, write_table)

def parse_grid(items):
    grid = []
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name or not values:
            sys.exit(f"sweep: --grid expects name=v1,v2,... (a train flag without --), got '{item}'")
        grid.append((name.lstrip("-"), values.split(",")))
    return grid


def check_shared(shared, grid):
    """Refuses, before any run starts, flags that every point would reject or that fight the grid."""
    names = flag_names(shared)
    for own in ("run", "resume"):
        if own in names:
            sys.exit(f"sweep: --{own} cannot be given after --: each grid point trains in its own DIR/<name>")
    for name, _ in grid:
        if name in names:
            sys.exit(f"sweep: --{name} is both a --grid axis and a flag after --; give it once")
    # The sweep passes --overwrite itself; a second one would fail every run.
    return [a for a in shared if a != "--overwrite"]


def result_path(out, name):
    return os.path.join(out, name + ".result.json")


def run_one(exe, out, name, flags, shared):
    run = os.path.join(out, name)
    seconds = cpu = None
    if read_summary(run) is not None:
        code = 0
    else:
        proc = Run(exe, run, ["--overwrite"] + flags + shared, os.path.join(out, name + ".log"))
        code = proc.wait()
        seconds, cpu = proc.seconds, proc.cpu_seconds
    result = {"exit": code, "job": job_id(), "rank": launcher_rank_size()[0]}
    s = read_summary(run)
    if s is not None:
        result.update(exact=s["heldout_exact"], token=s["heldout_token_acc"], solved_at=s["solved_at_step"],
                      steps=s["steps"], seconds=s["seconds"] if seconds is None else seconds)
        if cpu is not None:
            result["cpu_seconds"] = cpu
    tmp = result_path(out, name) + ".tmp"  # written whole, then renamed: rank 0 never reads half a file
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, result_path(out, name))
    return result


def wait_for_results(out, names):
    """Rank 0: every point's result, as the ranks that ran them wrote it (mpirun ends the job if one dies)."""
    results = []
    for name in names:
        while True:  # the point's result of this job, not one an earlier sweep left
            try:
                with open(result_path(out, name)) as f:
                    result = json.load(f)
                if result.get("job") == job_id():
                    break
            except OSError:
                pass
            time.sleep(0.2)
        results.append(result)
    return results


def plot(out, table, grid):
    """summary.png: held-out exact match per grid point, when matplotlib is installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    labels = [" ".join(f"{k}={r[k]}" for k, _ in grid) for r in table]
    values = [r["heldout_exact"] if r["heldout_exact"] != "" else 0 for r in table]
    fig, ax = plt.subplots(figsize=(max(4, 0.6 * len(table) + 2), 3.5))
    ax.bar(range(len(table)), values, color=["tab:blue" if r["exit"] == 0 else "tab:red" for r in table])
    ax.set_xticks(range(len(table)))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("held-out exact match")
    ax.set_ylim(0, 1)
    ax.set_title("sweep (red: the run failed)")
    fig.tight_layout()
    path = os.path.join(out, "summary.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main():
    argv = sys.argv[1:]
    shared = []
    if "--" in argv:
        i = argv.index("--")
        argv, shared = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="sweep directory (one run directory per grid point)")
    ap.add_argument("--grid", action="append", default=[], help="name=v1,v2,... (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--attnlab", default=default_exe())
    args = ap.parse_args(argv)
    if not args.grid:
        sys.exit("sweep: give at least one --grid name=v1,v2,...")
    if args.jobs < 1:
        sys.exit(f"sweep: --jobs must be >= 1, got {args.jobs}")
    grid = parse_grid(args.grid)
    shared = check_shared(shared, grid)
    shared = default_flags(shared, [k for k, _ in grid]) + shared
    os.makedirs(args.out, exist_ok=True)

    points = []
    for values in itertools.product(*[v for _, v in grid]):
        name = "-".join(f"{k}{v}" for (k, _), v in zip(grid, values))
        flags = [x for (k, _), v in zip(grid, values) for x in (f"--{k}", v)]
        points.append((name, dict(zip([k for k, _ in grid], values)), flags))
    rank, size = launcher_rank_size()
    if rank == 0:
        where = f", over {size} processes" if size > 1 else ""
        print(f"sweep: {len(points)} runs, {args.jobs} at a time{where}; shared flags: {shlex.join(shared) or '(none)'}",
              flush=True)
    mine = points[rank::size]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, args.attnlab, args.out, name, flags, shared) for name, _, flags in mine]
        for f in futures:
            f.result()
    if rank != 0:
        return  # rank 0 reports the whole sweep
    results = wait_for_results(args.out, [name for name, _, _ in points])

    columns = ["run"] + [k for k, _ in grid] + ["heldout_exact", "heldout_token_acc", "solved_at_step", "steps", "seconds",
                                                "cpu_seconds", "exit"]
    table = []
    for (name, values, _), r in zip(points, results):
        row = dict(values, run=name)
        row.update(heldout_exact=r.get("exact", ""), heldout_token_acc=r.get("token", ""),
                   solved_at_step=r.get("solved_at", ""), steps=r.get("steps", ""),
                   seconds=round(r["seconds"], 1) if "seconds" in r else "",
                   cpu_seconds=round(r["cpu_seconds"], 1) if "cpu_seconds" in r else "", exit=r["exit"])
        table.append(row)
    write_table(os.path.join(args.out, "summary.csv"), columns, table)
    print_table(columns, table)
    print(os.path.join(args.out, "summary.csv"))
    png = plot(args.out, table, grid)
    if png:
        print(png)
    failed = [n for (n, _, _), r in zip(points, results) if r["exit"] != 0]
    if failed:
        for n in failed:  # the reason is the log's last line: attnlab's one-line error
            reason = last_line(os.path.join(args.out, n + ".log")) or "(no log)"
            print(f"sweep: {n} failed: {reason}", file=sys.stderr)
        print(f"sweep: {len(failed)} runs failed (see their .log): {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
