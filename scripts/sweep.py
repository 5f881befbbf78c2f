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
which --target was reached (-1: never), steps run, seconds, exit code.
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
import csv
import itertools
import json
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


def default_exe():
    for cand in ["build/attnlab", "build-lead/attnlab"]:
        path = os.path.join(HERE, "..", cand)
        if os.path.exists(path):
            return os.path.normpath(path)
    return "attnlab"


def parse_grid(items):
    grid = []
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name or not values:
            sys.exit(f"sweep: --grid expects name=v1,v2,... (a train flag without --), got '{item}'")
        grid.append((name.lstrip("-"), values.split(",")))
    return grid


# What the sweep passes to every run unless the user's flags set it (flag, value or None).
DEFAULTS = [("quiet", None), ("threads", "1")]


def flag_names(args):
    """The option names in a train command line: --name or --name=value."""
    return {a[2:].partition("=")[0] for a in args if a.startswith("--") and len(a) > 2}


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


def default_flags(shared, grid):
    given = flag_names(shared) | {name for name, _ in grid}
    out = []
    for name, value in DEFAULTS:
        if name not in given:
            out += [f"--{name}"] + ([value] if value is not None else [])
    return out


def last_line(path):
    try:
        with open(path) as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def launcher_rank_size():
    """This process's rank and the process count under mpirun (Open MPI or PMI variables); 0, 1 otherwise."""
    env = os.environ
    size = int(env.get("OMPI_COMM_WORLD_SIZE") or env.get("PMI_SIZE") or 1)
    rank = int(env.get("OMPI_COMM_WORLD_RANK") or env.get("PMI_RANK") or 0)
    return rank, size


def job_id():
    """The same on every rank of one mpirun job and different for the next one (a stale result is not this job's)."""
    env = os.environ
    return env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_ess_base_jobid") or f"pid{os.getpid()}"


def single_process_env():
    """The environment without the launcher's variables: each run is one process, not a rank of this job."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}


def result_path(out, name):
    return os.path.join(out, name + ".result.json")


def run_one(exe, out, name, flags, shared):
    run = os.path.join(out, name)
    summary = os.path.join(run, "summary.json")
    if os.path.exists(summary):
        code, seconds = 0, None
    else:
        cmd = [exe, "train", "--run", run, "--overwrite"] + flags + shared
        start = time.time()
        with open(os.path.join(out, name + ".log"), "w") as log:
            code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=single_process_env())
        seconds = time.time() - start
    result = {"exit": code, "job": job_id(), "rank": launcher_rank_size()[0]}
    if os.path.exists(summary):
        with open(summary) as f:
            s = json.load(f)
        result.update(exact=s["heldout_exact"], token=s["heldout_token_acc"], solved_at=s["solved_at_step"],
                      steps=s["steps"], seconds=s["seconds"] if seconds is None else seconds)
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
    shared = default_flags(shared, grid) + shared
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
                                      "exit"]
    table = []
    for (name, values, _), r in zip(points, results):
        row = dict(values, run=name)
        row.update(heldout_exact=r.get("exact", ""), heldout_token_acc=r.get("token", ""),
                   solved_at_step=r.get("solved_at", ""), steps=r.get("steps", ""),
                   seconds=round(r["seconds"], 1) if "seconds" in r else "", exit=r["exit"])
        table.append(row)
    with open(os.path.join(args.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(table)
    widths = [max(len(c), *(len(str(r[c])) for r in table)) for c in columns]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for r in table:
        print("  ".join(str(r[c]).rjust(w) for c, w in zip(columns, widths)))
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
