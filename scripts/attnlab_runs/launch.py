"""Running attnlab: finding it, asking it to check train flags or claim a tool's directory, and
running `attnlab train` (new, or resumed where its directory already holds a run) with its CPU time.

A run is an ordinary attnlab run directory; what is read of it comes from its files (files.py).
"""
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from attnlab_runs.files import has_checkpoint, read_summary
from attnlab_runs.tool import refuse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def default_exe():
    for cand in ["build/attnlab", "build-lead/attnlab"]:
        path = os.path.join(ROOT, cand)
        if os.path.exists(path):
            return os.path.normpath(path)
    return "attnlab"


def single_process_env():
    """The environment without the launcher's variables: each run is one process, not a rank of this job."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}


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


def run_child(cmd, env=None):
    """(exit code, stdout, stderr, CPU seconds of the child: user + system, from wait4); env: the child's environment."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), usage.ru_utime + usage.ru_stime


def checked_child(cmd, env=None, shown=None):
    """run_child's stdout and CPU seconds; a RuntimeError naming the command (or `shown`) when it fails."""
    code, out, err, cpu = run_child(cmd, env)
    if code != 0:
        raise RuntimeError(f"{shown or ' '.join(map(shlex.quote, cmd))} failed ({code}): {err.strip()}")
    return out, cpu


def train(exe, run_dir, flags):
    """`attnlab train FLAGS --quiet --overwrite --run RUN_DIR` to its end: its summary.json and the CPU seconds
    it took; a RuntimeError with the command and attnlab's words when it fails."""
    _, cpu = checked_child([exe, "train"] + flags + ["--quiet", "--overwrite", "--run", run_dir])
    return read_summary(run_dir), cpu


def run_pool(fn, jobs, workers, who):
    """fn over jobs, `workers` at a time, results in the jobs' order; a RuntimeError ends the script in one line."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            return list(pool.map(fn, jobs))
        except RuntimeError as e:
            sys.exit(f"{who}: {e}")


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
