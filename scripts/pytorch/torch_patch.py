#!/usr/bin/env python3
"""Activation patching of an attnlab run in PyTorch, with PyTorch's own forward hooks: the
independent implementation that `attnlab patch --logits FILE` is checked against
(tests/test_patching_torch_parity.py).

    torch_patch.py RUN FILE    # FILE from attnlab patch --run RUN ... --logits FILE

FILE holds the ids both runs read, their logits, and every patch (its regions: a hook point,
a position or -1 for all, columns begin..begin+width or width 0 for all) with the logits attnlab
got. This script loads the run with attnlab_torch, runs the clean input caching each patched
point, then the corrupted input once per patch with hooks that copy the clean values in, and
prints the largest difference from attnlab's logits. The hook points (docs/hooks.md) on the
modules of attnlab_torch's model:
  P.blocks.N.resid_pre    the input of block N            (a forward pre-hook on the block)
  P.blocks.N.resid_post   the output of block N           (a forward hook on the block)
  P.blocks.N.A.z          the input of A's out_proj: the heads' weighted values, (B, T, h * d_v)
                          (a pre-hook on out_proj; parameter-free attention: A's output, a hook on A)
Exit 0: every logit within --tolerance (default 1e-5); 1: not; 2: a file it cannot read.
"""
import argparse
import json
import sys

import torch

import attnlab_torch


def hooked_module(model, point):
    """(module, "pre" or "post") whose input or output is the hook point's value."""
    stem, _, leaf = point.rpartition(".")
    if leaf == "resid_pre":
        return model.get_submodule(stem), "pre"
    if leaf == "resid_post":
        return model.get_submodule(stem), "post"
    if leaf == "z":
        attention = model.get_submodule(stem)
        if isinstance(attention.out_proj, torch.nn.Identity):  # parameter-free: its output is z (one Identity for all four)
            return attention, "post"
        return attention.out_proj, "pre"
    raise ValueError(f"torch_patch: no hook point '{point}' here (resid_pre, resid_post, z)")


def hook(model, point, change):
    """Registers change(value) -> value (or None to keep it) on the point; returns the handle."""
    module, where = hooked_module(model, point)
    if where == "post":
        return module.register_forward_hook(lambda m, args, out: change(out))

    def pre(m, args):
        new = change(args[0])
        return None if new is None else (new, *args[1:])
    return module.register_forward_pre_hook(pre)


def forward(model, ids):
    """Logits (T, V) of one sequence given as attnlab wrote its ids ({"src", "tgt_in"}, None when absent)."""
    inp = {}
    for key, pad in (("src", "src_pad"), ("tgt_in", "tgt_pad")):
        if ids.get(key) is not None:
            inp[key], inp[pad] = torch.tensor(ids[key], dtype=torch.long), None
    with torch.no_grad():
        return model(inp)[0]


def clean_values(model, ids, points):
    """The clean run's value at each point, and its logits."""
    cache, handles = {}, []
    for point in points:
        handles.append(hook(model, point, lambda v, p=point: cache.__setitem__(p, v.clone())))
    try:
        return cache, forward(model, ids)
    finally:
        for h in handles:
            h.remove()


def patched_logits(model, ids, regions, cache):
    """The corrupted run's logits with each region's clean values copied in."""
    def copy_in(v, region):
        v = v.clone()
        t = slice(None) if region["position"] < 0 else region["position"]
        c = slice(region["begin"], region["begin"] + region["width"]) if region["width"] > 0 else slice(None)
        v[:, t, c] = cache[region["point"]][:, t, c]
        return v
    handles = [hook(model, r["point"], lambda v, r=r: copy_in(v, r)) for r in regions]
    try:
        return forward(model, ids)
    finally:
        for h in handles:
            h.remove()


def largest_difference(run, data):
    """max |attnlab - torch| over the clean, corrupted and every patched run's logits, and the patch count."""
    model = attnlab_torch.load(run)
    points = sorted({r["point"] for p in data["patches"] for r in p["regions"]})
    cache, clean = clean_values(model, data["clean"], points)

    def diff(ours, theirs):
        return float((ours - torch.tensor(theirs, dtype=torch.float64)).abs().max())
    worst = max(diff(clean, data["clean_logits"]), diff(forward(model, data["corrupt"]), data["corrupt_logits"]))
    for p in data["patches"]:
        worst = max(worst, diff(patched_logits(model, data["corrupt"], p["regions"], cache), p["logits"]))
    return worst, len(data["patches"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="the run directory attnlab patch read")
    ap.add_argument("file", help="the file attnlab patch --logits wrote")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    try:
        with open(args.file) as f:
            data = json.load(f)
        worst, count = largest_difference(args.run, data)
    except (OSError, ValueError, KeyError, attnlab_torch.LoadError) as e:
        print(f"torch_patch: {e}", file=sys.stderr)
        return 2
    print(f"{count} patches of {args.run}: the largest |attnlab - PyTorch| logit difference is {worst:.3g}")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
