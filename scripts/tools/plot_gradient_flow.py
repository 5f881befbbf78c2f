#!/usr/bin/python3
"""Gradient flow of an attnlab run trained with --probe-every N.

usage: scripts/tools/plot_gradient_flow.py RUN_DIR [--out PNG] [--all-params]

Top: heatmaps (parameter tensor x probed step, log colour scale) of the
gradient L2 norm and of the update-to-weight ratio ||Δw|| / ||w||, from
probe_params.csv. By default only weight matrices are shown (biases and
LayerNorm vectors are left out; --all-params keeps them). Bottom: per point of
the residual stream (embeddings, after each block) the RMS of the activations
and of the gradient flowing back into it, from probe_stream.csv; and per
attention layer the mean entropy of its heads, from probe_heads.csv.
Writes RUN_DIR/gradient_flow.png unless --out is given.
"""
import os
import sys
from collections import defaultdict

from attnlab_runs.figures import run_figure_parser, save_figure
from attnlab_runs.files import read_csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


PROBE_HINT = "train with --probe-every N"


def is_matrix(name):
    last = name.rsplit(".", 1)[-1]
    return last == "weight" and ".ln" not in "." + name and not name.startswith("ln")


def heatmap(ax, fig, rows, key, names, steps, title, labels=True):
    index = {n: i for i, n in enumerate(names)}
    col = {s: j for j, s in enumerate(steps)}
    grid = np.full((len(names), len(steps)), np.nan)
    for r in rows:
        if r["param"] in index:
            grid[index[r["param"]], col[int(r["step"])]] = float(r[key])
    positive = grid[np.isfinite(grid) & (grid > 0)]
    norm = mcolors.LogNorm(vmin=positive.min(), vmax=positive.max()) if positive.size else None
    im = ax.imshow(np.where(grid > 0, grid, np.nan), aspect="auto", interpolation="nearest", norm=norm, cmap="viridis")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names if labels else [], fontsize=6)
    ticks = np.linspace(0, len(steps) - 1, min(len(steps), 8)).astype(int)
    ax.set_xticks(ticks)
    ax.set_xticklabels([steps[t] for t in ticks], fontsize=7)
    ax.set_xlabel("step")
    ax.set_title(title)
    fig.colorbar(im, ax=ax)


def main():
    ap = run_figure_parser(__doc__)
    ap.add_argument("--all-params", action="store_true")
    args = ap.parse_args()
    params = read_csv(os.path.join(args.run, "probe_params.csv"), PROBE_HINT)
    stream = read_csv(os.path.join(args.run, "probe_stream.csv"), PROBE_HINT)
    heads = read_csv(os.path.join(args.run, "probe_heads.csv"), PROBE_HINT)
    if not params:
        sys.exit("plot_gradient_flow: probe_params.csv has no rows")
    out = args.out or os.path.join(args.run, "gradient_flow.png")

    names = list(dict.fromkeys(r["param"] for r in params))
    if not args.all_params:
        names = [n for n in names if is_matrix(n)] or names
    steps = sorted({int(r["step"]) for r in params})

    fig = plt.figure(figsize=(14, 4 + 0.16 * len(names)))
    gs = fig.add_gridspec(2, 3, height_ratios=[max(3, 0.16 * len(names)), 3])
    heatmap(fig.add_subplot(gs[0, 0]), fig, params, "grad_norm", names, steps,
            "gradient L2 norm")
    heatmap(fig.add_subplot(gs[0, 1]), fig, params, "update_ratio", names, steps, "update / weight  ||Δw||/||w||",
            labels=False)
    heatmap(fig.add_subplot(gs[0, 2]), fig, params, "weight_norm", names, steps, "weight norm", labels=False)

    by_point = defaultdict(list)
    for r in stream:
        by_point[(int(r["index"]), r["point"])].append((int(r["step"]), float(r["act_rms"]), float(r["grad_rms"])))
    ax_a, ax_g = fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[1, 1])
    for (i, point), pts in sorted(by_point.items()):
        pts.sort()
        ax_a.plot([p[0] for p in pts], [p[1] for p in pts], label=point)
        ax_g.plot([p[0] for p in pts], [p[2] for p in pts], label=point)
    ax_a.set_title("residual stream RMS (forward)")
    ax_g.set_title("RMS of the gradient into the stream (backward)")
    ax_g.set_yscale("log")
    ax_a.legend(fontsize=7)

    ax_h = fig.add_subplot(gs[1, 2])
    by_layer = defaultdict(lambda: defaultdict(list))
    for r in heads:
        by_layer[r["layer"]][int(r["step"])].append(float(r["entropy"]))
    for layer, per_step in by_layer.items():
        s = sorted(per_step)
        ax_h.plot(s, [np.mean(per_step[x]) for x in s], label=layer)
    ax_h.set_title("mean attention entropy (nats)")
    ax_h.legend(fontsize=6)
    save_figure(fig, out, (ax_a, ax_g, ax_h), os.path.basename(os.path.normpath(args.run)) + ": gradient flow")


if __name__ == "__main__":
    main()
