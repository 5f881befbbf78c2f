"""What scripts/sweep.py and scripts/tune.py share: finding attnlab, the train flags they add,
launching one run and measuring its CPU time, reading a run's files, and the summary table.

A run is an ordinary attnlab run directory; everything read here comes from its files
(metrics.csv as attnlab appends it, summary.json once it has finished).
"""
import csv
import json
import os
import signal
import subprocess
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


def first_line(path):
    lines = log_lines(path)
    return lines[0] if lines else ""


def last_line(path):
    lines = log_lines(path)
    return lines[-1] if lines else ""


class Run:
    """One `attnlab train` process writing run directory `run`, its output in `log`.

    It runs in its own session, so a Ctrl-C at the terminal reaches only the tool,
    which then stops each run once, with SIGTERM (attnlab checkpoints and exits 143)."""

    def __init__(self, exe, run, flags, log):
        self.run, self.log = run, log
        self.cpu_seconds = 0.0
        self.exit = None  # None while running; then the exit code, -N for a signal N
        self.terminated = False
        self._start = time.time()
        self.seconds = None
        with open(log, "w") as out:
            self._proc = subprocess.Popen([exe, "train", "--run", run] + flags, stdout=out, stderr=subprocess.STDOUT,
                                          env=single_process_env(), start_new_session=True)

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

    def wait(self):
        while self.poll() is None:
            time.sleep(0.1)
        return self.exit

    def terminate(self):
        """SIGTERM, once: a second one would make attnlab leave without its checkpoint."""
        if self.poll() is None and not self.terminated:
            self.terminated = True
            os.kill(self._proc.pid, signal.SIGTERM)


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
