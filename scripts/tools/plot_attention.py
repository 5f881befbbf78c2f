#!/usr/bin/python3
"""A grid of attention heatmaps written by `attnlab attention`.

usage: scripts/tools/plot_attention.py MAPS_DIR [--out PNG]

One row per attention layer, one column per head; queries down, keys across,
labelled with the tokens, with one shared colorbar (weights 0 to 1). Writes MAPS_DIR/attention.png unless --out is given.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("maps")
    ap.add_argument("--out")
    ap.add_argument("--title")
    args = ap.parse_args()
    meta_path = os.path.join(args.maps, "attention.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except OSError as e:
        sys.exit(f"plot_attention: cannot read {meta_path}: {e.strerror} (run attnlab attention first)")
    layers = meta["layers"]
    if not layers:
        sys.exit("plot_attention: the model has no attention layers")
    cols = max(layer["heads"] for layer in layers)
    size = max(2.2, 0.28 * max(len(layer["keys"]) for layer in layers))
    fig, axes = plt.subplots(len(layers), cols, figsize=(size * cols + 1.6, size * len(layers) + 0.8), squeeze=False)
    image = None
    for r, layer in enumerate(layers):
        for c in range(cols):
            ax = axes[r, c]
            if c >= layer["heads"]:
                ax.axis("off")
                continue
            w = np.loadtxt(os.path.join(args.maps, layer["files"][c]), delimiter=",", ndmin=2)
            image = ax.imshow(w, vmin=0, vmax=1, cmap="Blues", interpolation="nearest")
            ax.set_xticks(range(len(layer["keys"])))
            ax.set_xticklabels(layer["keys"], fontsize=6, rotation=90)
            ax.set_yticks(range(len(layer["queries"])))
            ax.set_yticklabels(layer["queries"], fontsize=6)
            ax.set_title(f"{layer['name']} h{c}", fontsize=8)
            ax.set_xlabel("key", fontsize=7)
            ax.set_ylabel("query", fontsize=7)
    title = args.title or f"{meta['model']}: {meta['input']} -> {meta['output']} (step {meta['step']})"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(h_pad=1.5, rect=(0, 0, 0.93, 1))
    bar = fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02)
    bar.set_label("attention weight (each row sums to 1)", fontsize=8)
    out = args.out or os.path.join(args.maps, "attention.png")
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
