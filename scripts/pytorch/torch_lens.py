#!/usr/bin/env python3
"""The logit lens and direct logit attribution of an attnlab run, in PyTorch through forward hooks:
an implementation independent of attnlab's (interventions/lens.cpp), which
tests/test_lens_torch_parity.py compares with `attnlab lens --json --logits`.

    import torch_lens
    model = attnlab_torch.load("runs/rev")
    points, logits, parts = torch_lens.lens(model, {"src": [[7, 5, 8]]}, targets=[[5, 7, 8]])

Forward hooks record the residual stream entering the first block of the output stack (the
embedding) and leaving each block, each attention's z (the input of out_proj; a parameter-free
attention's output, which is its z) and each MLP's output. Each stream is decoded through the
final norm and the head (pre-LN), or the head alone (post-LN). The attribution splits each answer's
logit (targets not -100) into the part each write c contributes through ln_f with the final
stream's scale sigma held fixed: W_y . (gamma * (c - mean(c)) / sigma), plus the constant
W_y . beta + b_y; pre-LN only (None for post-LN).
"""
import torch


def _stack(model):
    """(prefix, blocks, attention names, final norm or None) of the stack the head reads."""
    if model.attnlab_config["arch"] == "seq2seq":
        return "decoder.", model.decoder.blocks, ("self_attn", "cross_attn"), getattr(model.decoder, "ln_f", None)
    return "", model.blocks, ("attn",), getattr(model, "ln_f", None)


def _record(model, prefix, blocks, attentions):
    """Registers the hooks; returns (what they record, their handles)."""
    seen, handles = {}, []

    def keep(name, what):
        def hook(module, args, output=None):
            seen[name] = (args[0] if what == "input" else output).detach()
        return hook

    handles.append(blocks[0].register_forward_pre_hook(keep(prefix + "embed", "input")))
    for i, block in enumerate(blocks):
        at = f"{prefix}blocks.{i}."
        handles.append(block.register_forward_hook(keep(at + "resid_post", "output")))
        if hasattr(block, "ff"):  # not attention-only
            handles.append(block.ff.register_forward_hook(keep(at + "mlp", "output")))
        for a in attentions:
            attn = getattr(block, a)
            if model.attnlab_config["parameter_free_attention"]:
                handles.append(attn.register_forward_hook(keep(at + a + ".z", "output")))
            else:
                handles.append(attn.out_proj.register_forward_pre_hook(keep(at + a + ".z", "input")))
    return seen, handles


def _writes(model, seen, prefix, blocks, attentions):
    """[(component, its write into the stream (B, T, d))] in forward order."""
    cfg = model.attnlab_config
    free = cfg["parameter_free_attention"]
    heads = 1 if free else cfg["n_heads"]
    out = [(prefix + "embed", seen[prefix + "embed"])]
    for i, block in enumerate(blocks):
        at = f"{prefix}blocks.{i}."
        for a in attentions:
            z = seen[at + a + ".z"]
            width = z.shape[-1] // heads
            for h in range(heads):
                cols = slice(h * width, (h + 1) * width)
                write = z if free else z[..., cols] @ getattr(block, a).out_proj.weight[:, cols].T
                out.append((f"{at}{a}.h{h}", write))
            if not free and getattr(block, a).out_proj.bias is not None:
                out.append((f"{at}{a}.out_proj.bias", getattr(block, a).out_proj.bias.expand(*z.shape[:-1], cfg["d_model"])))
        if at + "mlp" in seen:
            out.append((at + "mlp", seen[at + "mlp"]))
    return out


def _attribution(model, ln_f, writes, last, targets):
    """[[(component, part)] at each answer position, example by example]; ln_f None (norm none): each
    part through the head alone."""
    head_weight = model.tok_emb.weight if model.attnlab_config["tie_embeddings"] else model.head.weight
    head_bias = getattr(model.head, "bias", None)
    if ln_f is not None:
        sigma = torch.sqrt(last.var(-1, unbiased=False, keepdim=True) + ln_f.eps)  # (B, T, 1), frozen
    out = []
    for b, row in enumerate(targets):
        for t, y in enumerate(row):
            if y == -100:
                continue
            parts = []
            for name, c in writes:
                c = c[b, t]
                read = c if ln_f is None else ln_f.weight * (c - c.mean()) / sigma[b, t]
                parts.append((name, float(read @ head_weight[y])))
            constant = 0.0 if head_bias is None else float(head_bias[y])
            if ln_f is not None:
                constant += float(ln_f.bias @ head_weight[y])
            parts.append(("constant", constant))
            out.append(parts)
    return out


def lens(model, inputs, targets):
    """(decoded points, lens logits (P, B, T, V), attribution or None) of one batch (lists of ids as
    attnlab's format_batch lays them out; pads None)."""
    prefix, blocks, attentions, ln_f = _stack(model)
    seen, handles = _record(model, prefix, blocks, attentions)
    try:
        with torch.no_grad():
            model({k: torch.tensor(v, dtype=torch.long) if v is not None else None for k, v in inputs.items()})
    finally:
        for h in handles:
            h.remove()
    points = [prefix + "embed"] + [f"{prefix}blocks.{i}.resid_post" for i in range(len(blocks))]
    with torch.no_grad():
        logits = torch.stack([model.logits(ln_f(seen[p]) if ln_f is not None else seen[p]) for p in points])
        if model.attnlab_config["norm"] == "post":
            return points, logits, None
        writes = _writes(model, seen, prefix, blocks, attentions)
        return points, logits, _attribution(model, ln_f, writes, seen[points[-1]], targets)
