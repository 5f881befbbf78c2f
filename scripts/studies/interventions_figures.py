"""The figures of docs/interventions.md's worked study, from its CSVs (scripts/studies/interventions_study.py)."""
import matplotlib.pyplot as plt
import numpy as np

from attnlab_runs.figures import save_figure


def with_colorbar(fig, im, label, out, left=0.1):
    """The panels left of a colour bar of their own (tight_layout cannot place one beside several panels)."""
    fig.subplots_adjust(left=left, right=0.88, bottom=0.2, top=0.88, wspace=0.45)
    fig.colorbar(im, cax=fig.add_axes([0.9, 0.2, 0.012, 0.68]), label=label)
    fig.savefig(out, dpi=110)
    print(out)


def head_grid(rows):
    """{block label: {head: value}} of zero-ablation's change in exact match, in the rows' order."""
    grid = {}
    for r in sorted(rows, key=lambda r: r["component"]):
        if r["kind"] == "head":
            block, _, head = r["component"].rpartition(".h")
            grid.setdefault(block, {})[int(head)] = 100 * float(r["delta_exact_match"])
    return grid


def plot_ablation(rows, studies, out):
    """Per run (seed 0): each head's zero-ablation change in held-out exact match, rows = attentions."""
    fig, axes = plt.subplots(1, len(studies), figsize=(4.6 * len(studies), 3.2))
    for ax, name in zip(np.atleast_1d(axes), studies):
        grid = head_grid(r for r in rows if r["study"] == name and int(r["seed"]) == 0 and r["mode"] == "zero")
        blocks = list(grid)
        heads = max((len(v) for v in grid.values()), default=0)
        values = np.array([[grid[b].get(h, np.nan) for h in range(heads)] for b in blocks]) if blocks else np.zeros((0, 0))
        im = ax.imshow(values, cmap="Reds_r", vmin=-100, vmax=0, aspect="auto")
        for (i, j), v in np.ndenumerate(values):
            ax.text(j, i, f"{v:+.0f}", ha="center", va="center", fontsize=8, color="white" if v < -50 else "black")
        ax.set_xticks(range(heads), [f"h{h}" for h in range(heads)])
        ax.set_yticks(range(len(blocks)), blocks)
        ax.set_title(f"{name}: zero-ablation", fontsize=10)
    with_colorbar(fig, im, "change in held-out\nexact match (points)", out)


def plot_patching(rows, out):
    """Per run (seed 0) with patching: the residual stream's fraction restored, rows = points, columns = positions."""
    studies = list(dict.fromkeys(r["study"] for r in rows))
    fig, axes = plt.subplots(1, max(1, len(studies)), figsize=(6 * max(1, len(studies)), 2.8))
    for ax, name in zip(np.atleast_1d(axes), studies):
        mine = [r for r in rows if r["study"] == name and int(r["seed"]) == 0 and r["target"] == "residual"]
        points = list(dict.fromkeys(r["name"] for r in mine))
        width = 1 + max(int(r["position"]) for r in mine)
        values = np.full((len(points), width), np.nan)
        for r in mine:
            values[points.index(r["name"]), int(r["position"])] = float(r["restored"])
        im = ax.imshow(values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        ax.set_yticks(range(len(points)), points)
        ax.set_xticks(range(width))
        ax.set_xlabel(f"position (symbol {mine[0]['corrupt_token']} corrupted, {mine[0]['pairs']} pairs)")
        ax.set_title(f"{name}: residual stream patched", fontsize=10)
    with_colorbar(fig, im, "fraction of the logit\ndifference restored", out, left=0.13)


def plot_lens(rows, out):
    """The sort decoder's logit lens: the share of inputs whose right answer token is on top, per layer and answer token."""
    points = list(dict.fromkeys(r["point"] for r in rows))
    tokens = sorted({int(r["answer_token"]) for r in rows})
    values = np.zeros((len(points), len(tokens)))
    for i, p in enumerate(points):
        for j, t in enumerate(tokens):
            mine = [float(r["top1_right"]) for r in rows if r["point"] == p and int(r["answer_token"]) == t]
            values[i, j] = 100 * sum(mine) / len(mine) if mine else np.nan
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(tokens), 0.5 + 0.5 * len(points)))
    im = ax.imshow(values, cmap="Greens", vmin=0, vmax=100, aspect="auto")
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=8, color="white" if v > 60 else "black")
    ax.set_yticks(range(len(points)), points)
    ax.set_xticks(range(len(tokens)), [str(t) if t < len(tokens) - 1 else f"{t}\n<eos>" for t in tokens])
    ax.set_xlabel("answer token (the last is <eos>)")
    seeds = len({r["seed"] for r in rows})
    ax.set_title(f"sort decoder, logit lens: % of inputs with the right token on top ({seeds} seeds)", fontsize=10)
    fig.colorbar(im, ax=ax, label="%")
    save_figure(fig, out)
