#!/usr/bin/python3
"""Several attnlab runs on one figure, and a summary table.

usage: scripts/tools/compare_runs.py RUN_DIR [RUN_DIR ...] --out PNG [--labels a,b,...]

Panels: training loss and held-out exact match against step, and gradient
norm. Prints one line per run from its summary.json (when present).
"""
import argparse
import os
import sys

from attnlab_runs.figures import save_figure
from attnlab_runs.files import read_csv, read_summary

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def column(rows, name):
    pts = [(int(r["step"]), float(r[name])) for r in rows if r.get(name, "") != ""]
    return [p[0] for p in pts], [p[1] for p in pts]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--labels", help="comma-separated legend labels (default: directory names)")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    labels = args.labels.split(",") if args.labels else [os.path.basename(os.path.normpath(r)) for r in args.runs]
    if len(labels) != len(args.runs):
        sys.exit(f"compare_runs: {len(labels)} labels for {len(args.runs)} runs")

    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    print(f"{'run':30s} {'steps':>6s} {'exact':>7s} {'solved@':>8s} {'seconds':>8s}")
    for run, label in zip(args.runs, labels):
        rows = read_csv(os.path.join(run, "metrics.csv"))
        ax[0].plot(*column(rows, "loss"), label=label)
        ax[1].plot(*column(rows, "heldout_exact"), marker="o", ms=3, label=label)
        ax[2].plot(*column(rows, "grad_norm"), label=label)
        s = read_summary(run)
        if s is not None:
            print(f"{label:30s} {s['steps']:6d} {s['heldout_exact']:7.3f} {s['solved_at_step']:8d} {s['seconds']:8.1f}")
    ax[0].set_yscale("log")
    ax[0].set_title("training loss")
    ax[1].set_title("held-out exact match")
    ax[1].set_ylim(-0.02, 1.02)
    ax[2].set_yscale("log")
    ax[2].set_title("gradient norm")
    ax[1].legend(fontsize=8)
    save_figure(fig, args.out, ax, args.title)


if __name__ == "__main__":
    main()
