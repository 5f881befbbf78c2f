#!/usr/bin/python3
"""A hyperparameter sweep over a grid of `attnlab train` flags.

usage: scripts/tools/sweep.py --out DIR [--jobs N] [--attnlab PATH]
                        --grid lr=1e-3,3e-3 --grid warmup=0,100 --grid layers=1,2
                        [-- any other train flags, shared by every run]

Every combination of the --grid values is one point, run in its own run directory DIR/<name> (the
flag values in its name), in parallel up to --jobs at a time, each with --quiet --threads 1 unless
the flags after -- set --quiet or --threads themselves (theirs win). --run, --resume and a flag that
is also a --grid axis are refused up front: each point has its own run directory and its own value.
Before any run starts, attnlab itself checks every point's flags (`attnlab train --check`): an
unknown flag, a value out of range, a combination attnlab refuses (--heads 3 with --d-model 16) is
one line on stderr and exit 2, with nothing run. Every bad argument exits 2.

DIR belongs to the sweep, by the rule attnlab applies (`attnlab claim-dir --kind sweep`): a missing
or empty DIR is created and marked (.attnlab-sweep); a DIR marked so is continued; anything else (a
directory of yours, a run directory, a tuning study, a file, a symbolic link as DIR or inside it)
is refused, nothing written. DIR/sweep.json records the grid and the flags after --: the same
command continues the sweep, another one is refused. A point whose run has finished (summary.json)
is not run again; one that holds a checkpoint is resumed (`attnlab train --resume`); a point's run
is never replaced (--overwrite only where a run stopped before its first checkpoint: nothing trained).

At the end one table, printed and written to DIR/summary.csv: the point's run name, the grid values,
final held-out exact match and token accuracy, the step at which --target was reached (-1: never),
steps run, seconds, CPU-seconds (of the runs this sweep started), exit code.

Ctrl-C or SIGTERM (whatever disposition the sweep inherited: it sets its own) is passed on to the
running points (attnlab finishes its step, checkpoints and exits); the sweep waits for them, writes
the table of what finished, and exits 130 (SIGINT) or 143 (SIGTERM). The same command resumes it.

Across processes (and machines): `mpirun -np N scripts/tools/sweep.py ...` deals the
grid points to the N ranks in turn (point i to rank i mod N), each rank running
its share --jobs at a time; every point writes DIR/<name>.result.json, and rank
0 alone waits for all of them, prints the table and writes summary.csv and
summary.png (held-out exact match per point, when matplotlib is installed). A
failed point is a row with its exit code, not the end of the sweep (exit 1 at the
end). The ranks need no MPI library (they only read the launcher's rank variables),
and the runs they start are single processes.
"""
import argparse
import itertools
import json
import os
import shlex
import signal
import sys
import time

from attnlab_runs.files import last_line, print_table, read_summary, write_table
from attnlab_runs.flags import default_flags, flag_names
from attnlab_runs.launch import Run, check_train_flags, claim_directory, default_exe, require_attnlab, train_args
from attnlab_runs.schema import SWEEP_OUTCOMES
from attnlab_runs.tool import OneLineParser, job_id, launcher_rank_size, refuse, split_at_dashes

POLL_SECONDS = 0.1


def fail(message):
    refuse("sweep", message)


def parse_grid(items):
    grid = []
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name.lstrip("-") or not values or "" in values.split(","):
            fail(f"--grid expects name=v1,v2,... (a train flag without --), got '{item}'")
        grid.append((name.lstrip("-"), values.split(",")))
    return grid


def check_shared(shared, grid):
    """Refuses, before any run starts, flags that every point would reject or that fight the grid."""
    names = flag_names(shared)
    for own in ("run", "resume"):
        if own in names:
            fail(f"--{own} cannot be given after --: each grid point trains in its own DIR/<name>")
    for name, _ in grid:
        if name in names:
            fail(f"--{name} is both a --grid axis and a flag after --; give it once")
    # A point's run is never replaced: the sweep resumes it or leaves it.
    return [a for a in shared if a != "--overwrite"]


def check_points(exe, points, shared):
    """attnlab's own check of every point's flags (train --check writes nothing): the first refusal
    ends the sweep before anything runs."""
    require_attnlab("sweep", exe)
    for name, _, flags in points:
        refusal, _ = check_train_flags(exe, flags + shared)
        if refusal is not None:
            fail(f"point {name} ({shlex.join(flags)} and the flags after --) is refused: {refusal}")


def check_settings(out, grid, shared):
    """DIR/sweep.json: the grid and flags this sweep runs. The same command continues it; another is refused
    (its points' runs would be resumed with the flags they were started with, not the new ones)."""
    path = os.path.join(out, "sweep.json")
    record = {"grid": [[k, v] for k, v in grid], "shared": shared}
    try:
        with open(path) as f:
            stored = json.load(f)
    except FileNotFoundError:
        stored = None
    except (OSError, ValueError) as e:
        fail(f"cannot read {path}: {getattr(e, 'strerror', None) or e}")
    if stored is None:
        write_json(path, record)
    elif stored != record:
        fail(f"{out} holds a sweep with other settings (its sweep.json: grid and flags after --); use another --out, "
             "or the same command")


def write_json(path, value):
    tmp = f"{path}.{os.getpid()}.tmp"  # written whole, then renamed: rank 0 never reads half a file
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.replace(tmp, path)


def result_path(out, name):
    return os.path.join(out, name + ".result.json")


def start_point(exe, out, name, flags, shared):
    """The point's run: started, resumed, or (finished before) a Run that has ended."""
    run, log = os.path.join(out, name), os.path.join(out, name + ".log")
    if read_summary(run) is not None:
        return Run.finished(run, log)
    return Run(exe, run, train_args(run, flags + shared), log)


def record_result(out, name, proc, started):
    """DIR/<name>.result.json from the point's files: its exit code and, once finished, its figures."""
    result = {"exit": proc.exit, "job": job_id(), "rank": launcher_rank_size()[0]}
    s = read_summary(proc.run)
    if s is not None and proc.exit == 0:
        result.update(exact=s["heldout_exact"], token=s["heldout_token_acc"], solved_at=s["solved_at_step"],
                      steps=s["steps"], seconds=proc.seconds if started else s["seconds"])
        if started:
            result["cpu_seconds"] = proc.cpu_seconds
    write_json(result_path(out, name), result)
    return result


class Stop:
    """SIGINT and SIGTERM, set here whatever disposition the sweep inherited (a script may start it with
    SIGINT ignored, or blocked): the first one is remembered, and the running points are stopped."""

    def __init__(self):
        self.signal = None
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self._on_signal)

    def _on_signal(self, signum, _frame):
        if self.signal is None:
            self.signal = signum


def run_points(exe, out, mine, shared, jobs, stop):
    """Runs this process's points, `jobs` at a time. On a signal, no new point starts; the running ones
    get the same signal once (attnlab checkpoints and exits) and are waited for."""
    pending, running, forwarded = list(mine), {}, False
    try:
        while pending or running:
            while pending and len(running) < jobs and stop.signal is None:
                name, _, flags = pending.pop(0)
                proc = start_point(exe, out, name, flags, shared)
                running[name] = (proc, proc.exit is None)  # started here (not finished before): its CPU time counts
            if stop.signal is not None and not forwarded:
                forwarded = True
                for proc, _ in running.values():
                    proc.terminate(stop.signal)
                pending = []
            for name, (proc, started) in list(running.items()):
                if proc.poll() is not None:
                    record_result(out, name, proc, started)
                    del running[name]
            if running:
                time.sleep(POLL_SECONDS)
    except BaseException:  # the sweep's own failure (a full disk): no run is left training unsupervised
        for proc, _ in running.values():
            proc.terminate()
        for proc, _ in running.values():
            proc.wait()
        raise


def read_results(out, names, wait):
    """Every point's result of this job, as the rank that ran it wrote it; with wait, rank 0 waits for the
    other ranks' (mpirun ends the job if one dies), else it takes those there are."""
    results = {}
    for name in names:
        while True:  # the point's result of this job, not one an earlier sweep left
            try:
                with open(result_path(out, name)) as f:
                    result = json.load(f)
                if result.get("job") == job_id():
                    results[name] = result
                    break
            except (OSError, ValueError):
                pass
            if not wait:
                break
            time.sleep(0.2)
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


def parse_args(argv):
    argv, shared = split_at_dashes(argv)
    ap = OneLineParser(prog="sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="sweep directory (one run directory per grid point)")
    ap.add_argument("--grid", action="append", default=[], help="name=v1,v2,... (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--attnlab", default=default_exe())
    args = ap.parse_args(argv)
    if not args.grid:
        fail("give at least one --grid name=v1,v2,...")
    if args.jobs < 1:
        fail(f"--jobs must be >= 1, got {args.jobs}")
    args.grid = parse_grid(args.grid)
    args.shared = check_shared(shared, args.grid)
    return args


def points_of(grid):
    """(name, {axis: value}, flags) of every combination of the grid's values."""
    points = []
    for values in itertools.product(*[v for _, v in grid]):
        name = "-".join(f"{k}{v}" for (k, _), v in zip(grid, values))
        flags = [x for (k, _), v in zip(grid, values) for x in (f"--{k}", v)]
        points.append((name, dict(zip([k for k, _ in grid], values)), flags))
    return points


def summarise(out, grid, points, results):
    """The table of the points with a result (all of them, unless the sweep was interrupted): printed,
    DIR/summary.csv and summary.png. Returns the names of the points that failed."""
    columns = ["run"] + [k for k, _ in grid] + SWEEP_OUTCOMES
    table = []
    for name, values, _ in points:
        if name not in results:
            continue
        r = results[name]
        row = dict(values, run=name)
        row.update(heldout_exact=r.get("exact", ""), heldout_token_acc=r.get("token", ""),
                   solved_at_step=r.get("solved_at", ""), steps=r.get("steps", ""),
                   seconds=round(r["seconds"], 1) if "seconds" in r else "",
                   cpu_seconds=round(r["cpu_seconds"], 1) if "cpu_seconds" in r else "", exit=r["exit"])
        table.append(row)
    write_table(os.path.join(out, "summary.csv"), columns, table)
    print_table(columns, table)
    print(os.path.join(out, "summary.csv"))
    png = plot(out, table, grid)
    if png:
        print(png)
    return [row["run"] for row in table if row["exit"] != 0]


def main():
    stop = Stop()  # first: a signal from here on is answered
    args = parse_args(sys.argv[1:])
    shared = default_flags(args.shared, [k for k, _ in args.grid]) + args.shared
    points = points_of(args.grid)
    check_points(args.attnlab, points, shared)
    claim_directory("sweep", args.attnlab, "sweep", args.out)
    check_settings(args.out, args.grid, args.shared)
    rank, size = launcher_rank_size()
    if rank == 0:
        where = f", over {size} processes" if size > 1 else ""
        print(f"sweep: {len(points)} runs, {args.jobs} at a time{where}; shared flags: {shlex.join(shared) or '(none)'}",
              flush=True)
    run_points(args.attnlab, args.out, points[rank::size], shared, args.jobs, stop)
    if rank != 0:
        return  # rank 0 reports the whole sweep, and says how it ended (a rank's non-zero exit would end the job)
    results = read_results(args.out, [name for name, _, _ in points], wait=stop.signal is None)
    failed = summarise(args.out, args.grid, points, results)
    if stop.signal is not None:
        print(f"sweep: interrupted ({signal.Signals(stop.signal).name}); {sum(r['exit'] == 0 for r in results.values())} "
              f"of {len(points)} points finished; the same command resumes the sweep", file=sys.stderr)
        sys.exit(128 + stop.signal)
    if failed:
        for n in failed:  # the reason is the log's last line: attnlab's one-line error
            reason = last_line(os.path.join(args.out, n + ".log")) or "(no log)"
            print(f"sweep: {n} failed: {reason}", file=sys.stderr)
        print(f"sweep: {len(failed)} runs failed (see their .log): {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:  # a full disk, a directory that became unwritable: one line, never a traceback
        fail(f"cannot write {e.filename or 'a file'}: {e.strerror}")
