#!/usr/bin/python3
"""Training curves of one attnlab run from its metrics.csv.

usage: scripts/tools/plot_metrics.py RUN_DIR [--out PNG]

Four panels: training loss, accuracy (train teacher-forced and held-out
greedy exact match), learning rate, and gradient norm (before clipping).
Writes RUN_DIR/metrics.png unless --out is given.
"""
import os
import sys

from attnlab_runs.figures import run_figure_parser, save_figure
from attnlab_runs.files import read_csv
from attnlab_runs.schema import METRICS

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(run):
    path = os.path.join(run, METRICS)
    rows = read_csv(path)
    if not rows:
        sys.exit(f"plot_metrics: {path} has no rows yet")
    return rows


def column(rows, name):
    """(steps, values) of the rows where `name` is filled in."""
    xs, ys = [], []
    for r in rows:
        if r.get(name, "") != "":
            xs.append(int(r["step"]))
            ys.append(float(r[name]))
    return xs, ys


def main():
    ap = run_figure_parser(__doc__)
    args = ap.parse_args()
    rows = read_metrics(args.run)
    out = args.out or os.path.join(args.run, "metrics.png")

    fig, ax = plt.subplots(2, 2, figsize=(10, 7))
    ax[0, 0].plot(*column(rows, "loss"))
    ax[0, 0].set_yscale("log")
    ax[0, 0].set_title("training loss")
    for name, label in [("train_token_acc", "train token (teacher-forced)"), ("train_exact", "train exact"),
                        ("heldout_token_acc", "held-out token (greedy)"), ("heldout_exact", "held-out exact")]:
        xs, ys = column(rows, name)
        ax[0, 1].plot(xs, ys, marker="o" if name.startswith("heldout") else None, ms=3, label=label)
    ax[0, 1].set_ylim(-0.02, 1.02)
    ax[0, 1].set_title("accuracy")
    ax[0, 1].legend(fontsize=8)
    ax[1, 0].plot(*column(rows, "lr"))
    ax[1, 0].set_title("learning rate")
    ax[1, 1].plot(*column(rows, "grad_norm"))
    ax[1, 1].set_yscale("log")
    ax[1, 1].set_title("gradient norm (before clipping)")
    save_figure(fig, out, ax.flat, os.path.basename(os.path.normpath(args.run)))


if __name__ == "__main__":
    main()
