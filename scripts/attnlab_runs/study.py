"""What the study drivers (scripts/studies/) share: where a row ran, medians over seeds, and the
generated blocks of the docs' pages."""
import math
import os
import re
import sys

from attnlab_runs.files import read_csv
from attnlab_runs.launch import ROOT


def cpu_kind():
    """The CPU as /proc/cpuinfo names it, with its family and model: "AMD EPYC, family 26, model 2". A run's
    exact steps hold only on the CPU kind it ran on (another kind rounds the products differently), so every
    row records it."""
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields.setdefault(k.strip(), v.strip())
    return (f"{fields.get('model name', 'unknown CPU')}, family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}")


def provenance(rows):
    """Where and when rows ran, each distinct (date, CPU) once in row order: "2026-12-01 on Intel(R) Xeon(R)
    Processor, family 6"."""
    seen = []
    for r in rows:
        where = f"{r['date']} on {r['cpu']}"
        if where not in seen:
            seen.append(where)
    return "; ".join(seen)


def check_provenance(rows, path, who):
    """Every row read back must say where it ran; one line and exit 1 otherwise."""
    for r in rows:
        if not r.get("date") or not r.get("cpu"):
            sys.exit(f"{who}: {path}: the row {r.get('experiment') or r.get('setting')} "
                     f"{r.get('variant') or r.get('implementation')} seed {r.get('seed')} has no date or cpu "
                     "(where it was measured)")


def add_places(parser, runs):
    """--runs (the study's run directories, under runs/RUNS) and --docs (where its pages and CSVs are)."""
    parser.add_argument("--runs", default=os.path.join(ROOT, "runs", runs), help="the run directories")
    parser.add_argument("--docs", default=os.path.join(ROOT, "docs"), help="the pages and CSVs written")


def read_rows(path, who):
    """The rows of a study's CSV ([] before its first run), each checked to say where it ran."""
    rows = read_csv(path, missing_ok=True)
    check_provenance(rows, path, who)
    return rows


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def median_range(steps, cap):
    """Steps to a target over seeds (None: not by the cap) as "median (min–max)": "2600 (2000–4200)",
    "250 (250 to > 3000)", "50 (all 3 seeds)", "50 (single seed)". A seed that did not get there counts as
    beyond the cap."""
    values = [s or math.inf for s in steps]

    def shown(v):
        return f"{v:g}" if v != math.inf else f"> {cap}"
    m = shown(median(values))
    low, high = shown(min(values)), shown(max(values))
    if len(values) == 1:
        return f"{m} (single seed)"
    if low == high:
        return f"{m} (all {len(values)} seeds)"
    return f"{m} ({low}–{high})" if high[0] != ">" else f"{m} ({low} to {high})"


def replace_block(text, name, body):
    """The text between <!-- BEGIN name --> and <!-- END name --> becomes body (appended if absent)."""
    pattern = re.compile(rf"(<!-- BEGIN {name} -->\n).*?(<!-- END {name} -->)", re.S)
    if not pattern.search(text):
        return text + f"\n<!-- BEGIN {name} -->\n{body}\n<!-- END {name} -->\n"
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
