#!/usr/bin/env python3
"""scripts/tools/sweep.py (a ctest test of seconds): its runs are tests/fake_attnlab.py's, its directory is
claimed by the real attnlab (`attnlab claim-dir`, which the fake passes on).

1. The sweep's directory: a directory of the user's, a run directory, a tuning study, a symbolic link
   as the directory or inside it, a regular file and '' are refused with one line and exit 2, nothing
   written or replaced; a finished sweep run again runs nothing; another command on it is refused.
2. Signals: SIGINT (inherited ignored: the sweep sets its own disposition) and SIGTERM reach the running
   points, which checkpoint; the sweep writes the table of what finished and exits 130 or 143 with no
   traceback; the same command resumes each point from its checkpoint (train --resume, never
   --overwrite), and its metrics continue where they stopped.
3. Before anything runs, attnlab checks every point: an unknown flag after --, an unknown grid axis,
   a value out of range, --target 2 (fake), a combination the real attnlab refuses: one line, exit 2,
   nothing written.
4. Bad arguments exit 2 with one line (--jobs 0, a malformed --grid, an unknown option); a full disk
   while writing the sweep's files is one line and exit 2, not a traceback.

usage: test_sweep.py --attnlab BUILD/attnlab
"""
import argparse
import csv
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from checks import check, verdict

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP = os.path.join(os.path.dirname(HERE), "scripts", "tools", "sweep.py")
FAKE = os.path.join(HERE, "fake_attnlab.py")


def env_of(real, seconds="0.01"):
    return dict(os.environ, FAKE_ATTNLAB_REAL=real, FAKE_ATTNLAB_EVAL_SECONDS=seconds)


def sweep(real, out, args, exe=FAKE, seconds="0.01"):
    return subprocess.run([sys.executable, SWEEP, "--out", out, "--attnlab", exe] + args, capture_output=True, text=True,
                          timeout=120, env=env_of(real, seconds))


def one_line_exit_2(r, starts, what):
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith(starts) and "Traceback" not in r.stderr,
          what, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}")


def tree(path):
    """Every path under `path` with its content (files) or target (links), to show nothing changed."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = os.path.join(root, name)
            if os.path.islink(p):
                out[p] = "-> " + os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[p] = f.read()
            else:
                out[p] = "dir"
    return out


def argv_lines(run):
    with open(os.path.join(run, "fake_argv.txt")) as f:
        return [line.split() for line in f]


GRID = ["--grid", "lr=0.01,0.02"]
FLAGS = ["--", "--steps", "60", "--eval-every", "10"]


def check_ownership(real, tmp):
    mine = os.path.join(tmp, "mine")
    os.makedirs(mine)
    with open(os.path.join(mine, "summary.csv"), "w") as f:
        f.write("the user's own table\n")
    run = os.path.join(tmp, "arun")
    os.makedirs(os.path.join(run, "checkpoints"))
    with open(os.path.join(run, ".attnlab-run"), "w") as f:
        f.write("attnlab run directory, format 1\n")
    with open(os.path.join(run, "config.ini"), "w") as f:
        f.write("task = sort\n")
    study = os.path.join(tmp, "study")
    subprocess.run([real, "claim-dir", "--kind", "study", study], check=True)
    target = os.path.join(tmp, "target")
    os.makedirs(target)
    link = os.path.join(tmp, "link")
    os.symlink(target, link)
    afile = os.path.join(tmp, "afile")
    with open(afile, "w") as f:
        f.write("mine\n")
    before = tree(tmp)
    cases = [(mine, "it holds files and is not a sweep directory (no .attnlab-sweep marker)"),
             (run, "it is an attnlab run directory"), (study, "it is scripts/tools/tune.py's tuning study directory"),
             (link, "it is a symbolic link"), (link + "/", "it is a symbolic link"), (afile, "it is not a directory")]
    for out, why in cases:
        r = sweep(real, out, GRID + FLAGS)
        one_line_exit_2(r, f"sweep: --out refuses to write into '{out}': {why}", f"--out {out[len(tmp) + 1:]}: refused")
    r = sweep(real, "", GRID + FLAGS)
    one_line_exit_2(r, "sweep: --out needs a path, got an empty one", "--out '': refused with one line")
    check(tree(tmp) == before, "the refused sweeps wrote, replaced and removed nothing")

    out = os.path.join(tmp, "sweep")
    r = sweep(real, out, GRID + FLAGS)
    check(r.returncode == 0 and os.path.isfile(os.path.join(out, ".attnlab-sweep")), "a new sweep directory is marked",
          r.stdout + r.stderr)
    r = sweep(real, out, GRID + FLAGS)
    check(r.returncode == 0 and all(len(argv_lines(os.path.join(out, p))) == 1 for p in ("lr0.01", "lr0.02")),
          "the same command again: the finished points are not run again", r.stdout + r.stderr)
    r = sweep(real, out, GRID + ["--", "--steps", "80", "--eval-every", "10"])
    one_line_exit_2(r, f"sweep: {out} holds a sweep with other settings", "another command on a sweep's directory: refused")
    os.symlink(afile, os.path.join(out, "lr0.03.log"))
    r = sweep(real, out, GRID + FLAGS)
    one_line_exit_2(r, f"sweep: --out refuses to write into '{out}': its lr0.03.log is a symbolic link",
                    "a symbolic link inside the sweep's directory: refused")
    with open(afile) as f:
        check(f.read() == "mine\n", "the file the link points to is untouched")


def interrupt(real, out, sig, ignore_sigint):
    """Starts a 2-point sweep (about 2 s per point), waits until both points run, sends `sig`."""
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    proc = subprocess.Popen([sys.executable, SWEEP, "--out", out, "--attnlab", FAKE, "--jobs", "2"] + GRID +
                            ["--", "--steps", "100", "--eval-every", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env_of(real, "0.2"), preexec_fn=pre)
    deadline = time.time() + 60
    while time.time() < deadline and not all(
            os.path.exists(os.path.join(out, p, "checkpoints", "step-00000010.optim.safetensors")) for p in ("lr0.01", "lr0.02")):
        time.sleep(0.05)
    proc.send_signal(sig)
    out_text, err = proc.communicate(timeout=60)
    return proc.returncode, out_text, err


def check_signals(real, tmp):
    out = os.path.join(tmp, "interrupted")
    code, text, err = interrupt(real, out, signal.SIGINT, ignore_sigint=True)
    check(code == 130 and "interrupted (SIGINT)" in err and "the same command resumes" in err and "Traceback" not in err,
          "SIGINT (inherited ignored): the sweep stops, exit 130, says how to resume, no traceback", f"{code}\n{text}\n{err}")
    table = os.path.join(out, "summary.csv")
    rows = list(csv.DictReader(open(table))) if os.path.exists(table) else []
    check(sorted(row["exit"] for row in rows) == ["130", "130"], "the table of the interrupted sweep: each point's exit 130",
          str(rows))
    for p in ("lr0.01", "lr0.02"):
        run = os.path.join(out, p)
        check(not os.path.exists(os.path.join(run, "summary.json")) and
              any(n.endswith(".optim.safetensors") for n in os.listdir(os.path.join(run, "checkpoints"))),
              f"{p}: stopped by the signal passed on, with a checkpoint")
    r = sweep(real, out, ["--jobs", "2"] + GRID + ["--", "--steps", "100", "--eval-every", "10"])
    check(r.returncode == 0, "the same command resumes the sweep to its end", r.stdout + r.stderr)
    for p in ("lr0.01", "lr0.02"):
        run = os.path.join(out, p)
        argv = argv_lines(run)
        check(len(argv) == 2 and argv[1][:3] == ["train", "--resume", run] and "--overwrite" not in argv[1],
              f"{p}: resumed with train --resume, not replaced", str(argv))
        steps = [int(row["step"]) for row in csv.DictReader(open(os.path.join(run, "metrics.csv")))]
        check(steps == list(range(10, 101, 10)), f"{p}: its metrics continue where it stopped (steps 10..100 once each)",
              str(steps))

    out = os.path.join(tmp, "terminated")
    code, text, err = interrupt(real, out, signal.SIGTERM, ignore_sigint=False)
    check(code == 143 and "interrupted (SIGTERM)" in err and "Traceback" not in err, "SIGTERM: exit 143, no traceback",
          f"{code}\n{text}\n{err}")
    check(os.path.exists(os.path.join(out, "summary.csv")), "SIGTERM: the table of what finished is written")


def check_validation(real, tmp):
    cases = [(GRID + ["--", "--bogus", "1"], "unrecognised option '--bogus'", "an unknown flag after --"),
             (["--grid", "bogus=1,2"], "unrecognised option '--bogus'", "an unknown grid axis"),
             (["--grid", "lr=0.01,-1"], "--lr must be > 0, got -1", "a value out of range"),
             (GRID + ["--", "--target", "2"], "--target must be in [0, 1], got 2", "--target 2")]
    for args, message, what in cases:
        out = os.path.join(tmp, "checked")
        r = sweep(real, out, args)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("sweep: point ") and message in lines[0] and
              not os.path.exists(out), f"{what}: refused by attnlab's check, one line, exit 2, nothing run",
              f"exit {r.returncode}\n{r.stdout}{r.stderr}")
    out = os.path.join(tmp, "real")
    r = sweep(real, out, ["--grid", "heads=2,3", "--", "--task", "reverse", "--d-model", "16", "--steps", "2"], exe=real)
    one_line_exit_2(r, "sweep: point heads3 (--heads 3 and the flags after --) is refused: attnlab train: --heads 3 does "
                    "not divide --d-model 16", "real attnlab: a point it refuses ends the sweep before anything runs")
    check(not os.path.exists(out), "real attnlab: nothing written")


def check_bad_arguments(real, tmp):
    out = os.path.join(tmp, "bad")
    for args, starts in ((GRID + ["--jobs", "0"], "sweep: --jobs must be >= 1, got 0"),
                         (["--grid", "lr"], "sweep: --grid expects name=v1,v2,..."),
                         (GRID + ["--bogus"], "sweep: unrecognized arguments: --bogus"),
                         ([], "sweep: give at least one --grid")):
        one_line_exit_2(sweep(real, out, args), starts, f"{' '.join(args)}: one line, exit 2")
    full = ("import errno, os, runpy, sys\n"
            "def full(src, dst):\n"
            "    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), dst)\n"
            "os.replace = full\n"
            f"sys.argv = [{SWEEP!r}] + sys.argv[1:]\n"
            f"runpy.run_path({SWEEP!r}, run_name='__main__')\n")
    r = subprocess.run([sys.executable, "-c", full, "--out", out, "--attnlab", FAKE] + GRID + FLAGS, capture_output=True,
                       text=True, timeout=120, env=dict(env_of(real), PYTHONPATH=os.path.dirname(SWEEP)))
    one_line_exit_2(r, f"sweep: cannot write {os.path.join(out, 'sweep.json')}: No space left on device",
                    "a full disk: one line naming the file, exit 2, no traceback")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnlab", required=True)
    args = ap.parse_args()
    real = os.path.abspath(args.attnlab)
    tmp = tempfile.mkdtemp(prefix="test_sweep-")
    try:
        for name, step in (("ownership", check_ownership), ("signals", check_signals), ("validation", check_validation),
                           ("bad arguments", check_bad_arguments)):
            start = time.time()
            step(real, tmp)
            print(f"      ({name}: {time.time() - start:.1f} s)")  # printed, never asserted
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("test_sweep")


if __name__ == "__main__":
    sys.exit(main())
