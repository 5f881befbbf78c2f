"""Reading an attnlab run directory's files, and writing the tools' tables."""
import csv
import glob
import json
import os
import sys

from attnlab_runs.schema import METRICS, SUMMARY


def read_csv(path, hint="", missing_ok=False):
    """The rows of a CSV file as dicts ([] for a missing file when missing_ok); exits with one line naming
    the file if it cannot be read."""
    if missing_ok and not os.path.exists(path):
        return []
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        who = os.path.basename(sys.argv[0]).removesuffix(".py")
        sys.exit(f"{who}: cannot read {path}: {e.strerror}" + (f" ({hint})" if hint else ""))


def read_summary(run):
    """The run's summary.json (written when it ends), or None."""
    try:
        with open(os.path.join(run, SUMMARY)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def heldout_rows(run):
    """The rows of the run's metrics.csv that hold a held-out evaluation, as {column: float}, in step order.
    A row still being written (no newline yet) is left for the next read."""
    try:
        with open(os.path.join(run, METRICS), newline="") as f:
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


def heldout_curve(run):
    """[[step, held-out exact], ...] from the rows of metrics.csv that carry an evaluation."""
    return [[int(r["step"]), r["heldout_exact"]] for r in heldout_rows(run)]


def held_step(evals, target, patience):
    """The first evaluation step of `patience` consecutive evaluations with exact >= target, else None."""
    run = 0
    for i, (_, exact) in enumerate(evals):
        run = run + 1 if exact >= target else 0
        if run == patience:
            return evals[i - patience + 1][0]
    return None


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
