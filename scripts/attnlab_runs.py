"""What scripts/sweep.py and scripts/tune.py share: finding attnlab, asking it to claim the tool's
directory and to check train flags, the train flags they add, launching one run (new, or resumed
where its directory already holds one) and measuring its CPU time, reading a run's files, the
summary table, and refusing bad input with one line and exit 2.

A run is an ordinary attnlab run directory; everything read here comes from its files
(metrics.csv as attnlab appends it, summary.json once it has finished).
"""
import argparse
import csv
import glob
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The columns of summary.csv that are outcomes of a point; every other column is a setting.
# attnlab report (cli/report/report.js, OUTCOMES) reads the same list.
OUTCOME_COLUMNS = ["run", "heldout_exact", "heldout_token_acc", "heldout_loss", "solved_at_step", "steps", "seconds",
                   "cpu_seconds", "exit", "objective", "state", "trial", "seeds", "spread"]

# What both tools pass to every run unless the user's flags set it (flag, value or None).
DEFAULTS = [("quiet", None), ("threads", "1")]


def default_exe():
    for cand in ["build/attnlab", "build-lead/attnlab"]:
        path = os.path.join(HERE, "..", cand)
        if os.path.exists(path):
            return os.path.normpath(path)
    return "attnlab"


def flag_names(args):
    """The option names in a train command line: --name or --name=value."""
    return {a[2:].partition("=")[0] for a in args if a.startswith("--") and len(a) > 2}


def flag_value(args, name):
    """The value of --name in a train command line (--name V or --name=V; the last one), or None."""
    value = None
    for i, a in enumerate(args):
        if a == f"--{name}" and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(f"--{name}="):
            value = a.partition("=")[2]
    return value


def without_flag(args, name):
    """The command line without --name and its value (either form)."""
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
        elif a == f"--{name}":
            skip = i + 1 < len(args)
        elif not a.startswith(f"--{name}="):
            out.append(a)
    return out


def refuse(tool, message):
    """Bad input: one line on stderr (rank 0 alone under mpirun: every rank meets the same input), exit 2."""
    if launcher_rank_size()[0] == 0:
        print(f"{tool}: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose refusals are one line and exit 2, said by rank 0 alone (refuse)."""

    def error(self, message):
        refuse(self.prog.removesuffix(".py"), f"{message} (see --help)")


def ask_attnlab(exe, args):
    """(exit code, stdout, last line of stderr) of `attnlab ARGS`, as a single process; the code is None
    when attnlab cannot be started at all (the line then says why)."""
    try:
        r = subprocess.run([exe] + args, capture_output=True, text=True, env=single_process_env(), timeout=300)
    except OSError as e:
        return None, "", f"cannot run attnlab '{exe}' ({e.strerror}); give its path with --attnlab"
    lines = r.stderr.strip().splitlines()
    return r.returncode, r.stdout, lines[-1] if lines else f"attnlab {args[0]} exited {r.returncode}"


def require_attnlab(tool, exe):
    """One line and exit 2 when `exe` cannot be run at all (not found, not executable)."""
    code, _, line = ask_attnlab(exe, ["--version"])
    if code is None:
        refuse(tool, line)


def claim_directory(tool, exe, kind, out):
    """attnlab's rule for a tool's directory (training/run_dir/tool_dir.h): `out` created and marked as
    this tool's, or accepted as its own; anything else refused with attnlab's reason, exit 2."""
    where = [f"--dir={out}"] if out else [out]  # --dir=PATH: a PATH that starts with - is no option; '' positional
    code, _, line = ask_attnlab(exe, ["claim-dir", "--kind", kind] + where)
    if code != 0:
        refuse(tool, line.removeprefix("attnlab claim-dir: "))


def check_train_flags(exe, flags):
    """attnlab's own check of a train command line (train --check, which writes nothing): None and the
    resolved config.ini, or attnlab's one-line refusal and None."""
    code, out, line = ask_attnlab(exe, ["train", "--check"] + flags)
    return (None, out) if code == 0 else (line, None)


def resolved_value(config_ini, name):
    """`name = value` of a resolved config.ini's text (train --check prints one), or None."""
    for line in config_ini.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None


def default_flags(shared, own):
    """DEFAULTS that neither the shared flags nor the tool's own per-run flags (names in `own`) set."""
    given = flag_names(shared) | set(own)
    out = []
    for name, value in DEFAULTS:
        if name not in given:
            out += [f"--{name}"] + ([value] if value is not None else [])
    return out


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


def log_lines(path):
    try:
        with open(path, errors="replace") as f:
            return [line.strip() for line in f if line.strip()]
    except OSError:
        return []


def last_line(path):
    lines = log_lines(path)
    return lines[-1] if lines else ""


def has_checkpoint(run):
    """Whether the run holds a complete checkpoint (model and optimizer file) to resume from."""
    return bool(glob.glob(os.path.join(glob.escape(run), "checkpoints", "step-*.optim.safetensors")))


def train_args(run, flags):
    """The `attnlab train` arguments that train `run` with `flags` without replacing anything: a new run
    where there is none; --resume where it holds a checkpoint (its config.ini holds the flags; --quiet,
    which it does not record, is passed again); --overwrite only for a run that stopped before its first
    checkpoint (nothing trained; attnlab replaces only a directory it marked as its run)."""
    if not os.path.lexists(run):
        return ["--run", run] + flags
    if has_checkpoint(run):
        return ["--resume", run] + [f for f in flags if f == "--quiet"]
    return ["--run", run, "--overwrite"] + flags


class Run:
    """One `attnlab train ARGS` process writing run directory `run`, its output appended to `log`
    (the output of an earlier, interrupted part of the run stays above it).

    It runs in its own session, so a Ctrl-C at the terminal reaches only the tool,
    which then stops each run once, with SIGTERM (attnlab checkpoints and exits 143).
    Run.finished(run, log) stands for a run that ended before (its summary.json is there)."""

    def __init__(self, exe, run, args, log):
        self.run, self.log = run, log
        self.cpu_seconds = 0.0
        self.exit = None  # None while running; then the exit code, -N for a signal N
        self.terminated = False
        self._start = time.time()
        self.seconds = None
        self._proc = None
        self._log_start = os.path.getsize(log) if os.path.exists(log) else 0
        if exe is None:
            return
        with open(log, "a") as out:
            self._proc = subprocess.Popen([exe, "train"] + args, stdout=out, stderr=subprocess.STDOUT,
                                          env=single_process_env(), start_new_session=True)

    @classmethod
    def finished(cls, run, log):
        done = cls(None, run, [], log)
        done.exit, done.seconds = 0, 0.0
        return done

    def poll(self):
        """The exit code once the process has ended (its CPU time then read from its rusage), else None."""
        if self.exit is None:
            pid, status, usage = os.wait4(self._proc.pid, os.WNOHANG)
            if pid:
                self.exit = os.waitstatus_to_exitcode(status)
                self._proc.returncode = self.exit  # reaped here: Popen must not wait for it again
                self.cpu_seconds = usage.ru_utime + usage.ru_stime
                self.seconds = time.time() - self._start
        return self.exit

    def first_line(self):
        """The first line this part of the run wrote to its log (attnlab's one-line error when it failed)."""
        try:
            with open(self.log, "rb") as f:
                f.seek(self._log_start)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[0] if lines else ""

    def wait(self):
        while self.poll() is None:
            time.sleep(0.1)
        return self.exit

    def terminate(self, signum=signal.SIGTERM):
        """SIGTERM (or the signal the tool got), once: a second one would make attnlab leave without its
        checkpoint."""
        if self.poll() is None and not self.terminated:
            self.terminated = True
            os.kill(self._proc.pid, signum)


def read_summary(run):
    """The run's summary.json (written when it ends), or None."""
    try:
        with open(os.path.join(run, "summary.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def heldout_rows(run):
    """The rows of the run's metrics.csv that hold a held-out evaluation, as {column: float}, in step order.
    A row still being written (no newline yet) is left for the next read."""
    try:
        with open(os.path.join(run, "metrics.csv"), newline="") as f:
            text = f.read()
    except OSError:
        return []
    lines = text.split("\n")[:-1]  # the part after the last newline is unfinished
    if not lines:
        return []
    rows = []
    for row in csv.DictReader(lines):
        if row.get("heldout_exact", "") == "":
            continue
        rows.append({k: float(v) for k, v in row.items() if k and v not in ("", None)})
    return rows


def write_table(path, columns, rows):
    """summary.csv, written whole to a temporary file and renamed (a reader never sees half of it)."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def print_table(columns, rows, out=None):
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)), file=out)
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)), file=out)
