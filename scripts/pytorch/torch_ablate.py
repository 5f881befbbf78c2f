#!/usr/bin/env python3
"""Ablation through PyTorch forward hooks, written apart from attnlab's (interventions/ablation.h):
the parity test (tests/test_ablation_torch_parity.py) compares its logits with `attnlab ablate --logits`.

A component's output is read and replaced where PyTorch passes it: a head's columns of z as the
input of its attention's out_proj (a forward pre-hook), an attention's output and an MLP's
(the module `ff`) as their modules' outputs (forward hooks). Modes as docs/interventions.md says:
zero; mean (per position, over the set's sequences that reach it, padding left out); resample
(each example's donor, as attnlab's --logits file gives them; the mean where the donor has no
such position).

    torch_ablate.py RUN LOGITS.json COMPONENT...   prints both largest differences of compare() per component
"""
import re
import sys

import torch

import attnlab_torch

NAME = re.compile(r"^((?:encoder|decoder)\.)?blocks\.(\d+)(?:\.(attn|self_attn|cross_attn)\.h(\d+)|\.(mlp))?$")


def component_points(cfg, name):
    """[(point, first column, width or None for all)] of a component, as attnlab's Component::points; of each
    component of a group "a + b" (knocked out together: each hook on a point changes its own columns)."""
    if " + " in name:
        return [p for part in name.split(" + ") for p in component_points(cfg, part)]
    m = NAME.match(name)
    if not m:
        raise ValueError(f"not a component: {name}")
    stack, block, attention, head, mlp = m.groups()
    prefix = f"{stack or ''}blocks.{block}."
    if attention:
        width = cfg["d_model"] if cfg["parameter_free_attention"] else (cfg["d_v"] or cfg["d_model"] // cfg["n_heads"])
        return [(prefix + attention + ".z", int(head) * width, width)]
    if mlp:
        return [(prefix + "mlp.out", 0, None)]
    attentions = ["self_attn", "cross_attn"] if stack == "decoder." else ["attn"]
    mlp_out = [] if cfg.get("attention_only", False) else [(prefix + "mlp.out", 0, None)]
    return [(prefix + a + ".out", 0, None) for a in attentions] + mlp_out


def hook_on(model, point, function):
    """Registers function(value) -> value (or None: unchanged) where `point` passes."""
    if point.endswith(".z"):
        def pre(mod, args):
            new = function(args[0])
            return None if new is None else (new,) + tuple(args[1:])
        return model.get_submodule(point[:-2] + ".out_proj").register_forward_pre_hook(pre)
    path = point[:-len(".mlp.out")] + ".ff" if point.endswith(".mlp.out") else point[:-len(".out")]
    return model.get_submodule(path).register_forward_hook(lambda mod, args, out: function(out))


def stream_pad(cfg, batch, point):
    on_source = cfg["arch"] == "encoder" or (cfg["arch"] == "seq2seq" and point.startswith("encoder."))
    return batch["src_pad" if on_source else "tgt_pad"]


def tensors(batch):
    return {k: torch.tensor(v["data"]).reshape(v["shape"]).long() for k, v in batch.items()}


def record(model, batches, points):
    """Each point's value (B, T, w) per batch in the intact run."""
    values = {p: [] for p in points}
    handles = [hook_on(model, p, lambda v, p=p: values[p].append(v.detach().clone())) for p in points]
    with torch.no_grad():
        intact = [model(b) for b in batches]
    for h in handles:
        h.remove()
    return values, intact


def means(cfg, batches, values):
    """Each point's mean (T_max, w) over the positions its sequences reach."""
    out = {}
    for point, per_batch in values.items():
        t_max = max(v.shape[1] for v in per_batch)
        total = torch.zeros(t_max, per_batch[0].shape[2], dtype=torch.float64)
        count = torch.zeros(t_max, dtype=torch.float64)
        for b, v in zip(batches, per_batch):
            real = (stream_pad(cfg, b, point) == 0).double()  # (B, T)
            total[:v.shape[1]] += (v.double() * real[:, :, None]).sum(0)
            count[:v.shape[1]] += real.sum(0)
        out[point] = total / count.clamp(min=1)[:, None]
    return out


def replacement(cfg, batches, values, mean, donors, mode, where):
    """The full-width value that replaces a point's value in batch j (B, T, w)."""
    def source(point, j, v):
        b_count, t_count = v.shape[0], v.shape[1]
        if mode == "zero":
            return torch.zeros_like(v)
        rows = mean[point][:t_count].to(v.dtype).expand(b_count, -1, -1).clone()
        if mode == "mean":
            return rows
        first = sum(batches[k]["src" if "src" in batches[k] else "tgt_in"].shape[0] for k in range(j))
        for b in range(b_count):
            dj, db = where[donors[first + b]]
            donor = values[point][dj][db]
            valid = stream_pad(cfg, batches[dj], point)[db] == 0
            n = min(t_count, donor.shape[0])
            keep = valid[:n]
            rows[b, :n][keep] = donor[:n][keep].to(v.dtype)
        return rows
    return source


def ablated_logits(model, batches, name, mode, donors):
    """The logits (per batch) of the set with component `name` knocked out."""
    cfg = model.attnlab_config
    points = component_points(cfg, name)
    values, _ = record(model, batches, sorted({p for p, _, _ in points}))
    mean = means(cfg, batches, values)
    where = [(j, b) for j, batch in enumerate(batches) for b in range(next(iter(batch.values())).shape[0])]
    source = replacement(cfg, batches, values, mean, donors, mode, where)
    current = {"batch": 0}

    def change(point, first, width):
        def function(v):
            new = v.clone()
            end = v.shape[2] if width is None else first + width
            new[:, :, first:end] = source(point, current["batch"], v)[:, :, first:end]
            return new
        return function

    handles = [hook_on(model, p, change(p, first, width)) for p, first, width in points]
    out = []
    with torch.no_grad():
        for j, b in enumerate(batches):
            current["batch"] = j
            out.append(model(b))
    for h in handles:
        h.remove()
    return out


def compare(run, logits_file, names):
    """{pass: (the largest |attnlab - PyTorch|, the largest |attnlab's pass - attnlab's intact|)} over the real
    positions of every pass named (the second shows that the knock-out changed the logits)."""
    import json
    with open(logits_file) as f:
        record_ = json.load(f)
    model = attnlab_torch.load(run)
    cfg = model.attnlab_config
    batches = [tensors(b) for b in record_["batches"]]
    out_pad = "src_pad" if cfg["arch"] == "encoder" else "tgt_pad"
    worst = {}

    def given_of(p):
        return [torch.tensor(g["data"], dtype=torch.float64).reshape(g["shape"]) for g in p["logits"]]
    intact = given_of(record_["passes"][0])
    for p in record_["passes"]:
        name = p["component"]
        if name != "intact" and name not in names:
            continue
        with torch.no_grad():
            ours = [model(b) for b in batches] if name == "intact" else \
                ablated_logits(model, batches, name, record_["mode"], record_.get("donors"))
        diff = moved = 0.0
        for b, mine, given, plain in zip(batches, ours, given_of(p), intact):
            real = b[out_pad] == 0
            diff = max(diff, float((given - mine)[real].abs().max()))
            moved = max(moved, float((given - plain)[real].abs().max()))
        worst[name] = (diff, moved)
    return worst


if __name__ == "__main__":
    for component, (diff, moved) in compare(sys.argv[1], sys.argv[2], sys.argv[3:]).items():
        print(f"{component}\t{diff:.3g}\t{moved:.3g}")
