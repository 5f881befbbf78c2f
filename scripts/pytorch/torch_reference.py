#!/usr/bin/env python3
"""PyTorch reference for attnlab's three transformer models.

Implements the encoder tagger, the decoder-only LM and the encoder-decoder
with their own small modules (not nn.Transformer) whose parameter names match
attnlab's (`blocks.0.attn.q_proj.weight`, ...), gives them fixed random
weights, runs one small padded batch and writes, per case, a JSON fixture:
the config, every weight, the inputs (as attnlab's format_batch lays them out),
the logits, the loss and the gradient of every parameter.

tests/test_parity.cpp reads these fixtures; it needs no PyTorch. Rerun with

    python3 scripts/pytorch/torch_reference.py --out tests/data

The same model is also the PyTorch side of the training-throughput benchmark
(docs/benchmark.md): `--bench S|M|L --threads N` trains the encoder
tagger on fixed random batches and prints one JSON line with the same keys
as `attnlab bench` (scripts/pytorch/bench_vs_torch.sh runs both).

Weights are drawn in float32 (so attnlab loads exactly the same numbers) and
the forward and backward run in float64, so the fixture holds the exact
answer and the C++ test measures only attnlab's own float32 rounding.
"""
import argparse
import json
import math
import os
import sys


def pin_blas_threads(argv):
    """Fixes the BLAS thread count for --bench before torch loads the BLAS.

    Debian's torch calls the BLAS through the generic libblas.so.3 (OpenBLAS
    here), and torch.set_num_threads does not reach it: unpinned, OpenBLAS
    starts one thread per core, so a "1-thread" PyTorch run used both cores.
    OpenBLAS reads OPENBLAS_NUM_THREADS once, when it is loaded, so this must
    run before `import torch`. --blas-threads defaults to --threads.
    """
    def value(flag):
        for i, a in enumerate(argv):
            if a == flag and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
        return None
    if "--bench" not in argv and not any(a.startswith("--bench=") for a in argv):
        return
    blas = value("--blas-threads") or value("--threads") or "1"
    os.environ["OPENBLAS_NUM_THREADS"] = blas
    os.environ["OMP_NUM_THREADS"] = value("--threads") or "1"


def openblas_kernels():
    """The kernel family OpenBLAS runs (e.g. "SkylakeX"), or "unknown" where torch uses another BLAS."""
    import ctypes
    import glob
    libs = glob.glob("/usr/lib/x86_64-linux-gnu/openblas*/libopenblas.so.0")
    if not libs:
        return "unknown"
    lib = ctypes.CDLL(libs[0])
    lib.openblas_get_corename.restype = ctypes.c_char_p
    return lib.openblas_get_corename().decode()


pin_blas_threads(sys.argv[1:])
import torch  # noqa: E402  (after pin_blas_threads, on purpose)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

PAD, BOS, EOS, SEP = 0, 1, 2, 3  # datasets/vocab.h; task symbols start at 4
IGNORE = -100


# ---- layers -------------------------------------------------------------------

def attention_scale(text, d_k):
    if text == "sqrt":
        return 1.0 / math.sqrt(d_k)
    if text == "none":
        return 1.0
    if text == "linear":
        return 1.0 / d_k
    return float(text)


def sinusoidal_table(max_len, d):
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))."""
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    pos = torch.arange(max_len, dtype=torch.float64)
    for c in range(d):
        inv_freq = 10000.0 ** (-(c - c % 2) / d)
        pe[:, c] = torch.sin(pos * inv_freq) if c % 2 == 0 else torch.cos(pos * inv_freq)
    return pe


def rotary(x, base=10000.0):
    """x (..., T, d_k): rotate interleaved pairs (x[2i], x[2i+1]) at time t by t * base^(-2i/d_k)."""
    t_len, d_k = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k/2)
    angle = torch.arange(t_len, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T, d_k/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


class MultiHeadAttention(nn.Module):
    def __init__(self, cfg, rope):
        super().__init__()
        d, h = cfg["d_model"], cfg["n_heads"]
        self.h = h
        self.d_k = cfg["d_k"] or d // h
        self.d_v = cfg["d_v"] or d // h
        self.scale = attention_scale(cfg["attn_scale"], self.d_k)
        self.rope = rope
        bias = not cfg.get("no_bias", False)
        self.q_proj = nn.Linear(d, h * self.d_k, bias=bias)
        self.k_proj = nn.Linear(d, h * self.d_k, bias=bias)
        self.v_proj = nn.Linear(d, h * self.d_v, bias=bias)
        self.out_proj = nn.Linear(h * self.d_v, d, bias=bias)

    def forward(self, x, memory=None, causal=False, key_padding=None):
        mem = x if memory is None else memory
        b, t_q, t_k = x.shape[0], x.shape[1], mem.shape[1]
        q = self.q_proj(x).view(b, t_q, self.h, self.d_k).transpose(1, 2)  # (B, h, T_q, d_k)
        k = self.k_proj(mem).view(b, t_k, self.h, self.d_k).transpose(1, 2)  # (B, h, T_k, d_k)
        v = self.v_proj(mem).view(b, t_k, self.h, self.d_v).transpose(1, 2)  # (B, h, T_k, d_v)
        if self.rope:
            q, k = rotary(q), rotary(k)
        scores = (q @ k.transpose(-1, -2)) * self.scale  # (B, h, T_q, T_k)
        if not causal and key_padding is None:  # nothing to mask (the benchmark): plain softmax
            ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t_q, self.h * self.d_v)
            return self.out_proj(ctx)
        mask = torch.zeros(b, 1, t_q, t_k, dtype=torch.bool)
        if causal:
            mask |= torch.ones(t_q, t_k, dtype=torch.bool).triu(1 + t_k - t_q)
        if key_padding is not None:
            mask |= key_padding.bool()[:, None, None, :]
        # attnlab's convention: a fully masked query attends to nothing (weights 0).
        dead = mask.all(-1, keepdim=True)
        scores = scores.masked_fill(mask & ~dead, float("-inf")).masked_fill(dead, 0.0)
        w = torch.softmax(scores, dim=-1).masked_fill(dead, 0.0)
        ctx = (w @ v).transpose(1, 2).reshape(b, t_q, self.h * self.d_v)
        return self.out_proj(ctx)


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        bias = not cfg.get("no_bias", False)
        self.fc1 = nn.Linear(cfg["d_model"], cfg["d_ff"], bias=bias)
        self.fc2 = nn.Linear(cfg["d_ff"], cfg["d_model"], bias=bias)
        self.act = F.relu if cfg["activation"] == "relu" else F.gelu

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def layer_norm(cfg):
    """A block's norm: LayerNorm, or with norm "none" the identity (no parameters; then the
    pre and post arrangements are both x + f(x))."""
    return nn.Identity() if cfg["norm"] == "none" else nn.LayerNorm(cfg["d_model"], eps=1e-5)


def residual(pre, ln, x, f):
    """One sublayer: pre-LN x + f(ln(x)), post-LN ln(x + f(x))."""
    return x + f(ln(x)) if pre else ln(x + f(x))


class EncoderBlock(nn.Module):
    """Self-attention + FF; attention_only: no ff and no ln2."""

    def __init__(self, cfg):
        super().__init__()
        self.pre = cfg["norm"] == "pre"
        self.ln1 = layer_norm(cfg)
        self.attn = MultiHeadAttention(cfg, rope=cfg["positional"] == "rope")
        if not cfg.get("attention_only", False):
            self.ln2 = layer_norm(cfg)
            self.ff = FeedForward(cfg)

    def forward(self, x, pad, causal=False):
        x = residual(self.pre, self.ln1, x, lambda h: self.attn(h, causal=causal, key_padding=pad))
        return residual(self.pre, self.ln2, x, self.ff) if hasattr(self, "ff") else x


class DecoderBlock(nn.Module):
    """Causal self-attention (+ cross-attention) + FF. Rotary positions only in self-attention."""

    def __init__(self, cfg):
        super().__init__()
        self.pre = cfg["norm"] == "pre"
        self.ln1 = layer_norm(cfg)
        self.self_attn = MultiHeadAttention(cfg, rope=cfg["positional"] == "rope")
        self.ln2 = layer_norm(cfg)
        self.cross_attn = MultiHeadAttention(cfg, rope=False)
        if not cfg.get("attention_only", False):
            self.ln3 = layer_norm(cfg)
            self.ff = FeedForward(cfg)

    def forward(self, x, pad, memory, memory_pad):
        x = residual(self.pre, self.ln1, x, lambda h: self.self_attn(h, causal=True, key_padding=pad))
        x = residual(self.pre, self.ln2, x, lambda h: self.cross_attn(h, memory, key_padding=memory_pad))
        return residual(self.pre, self.ln3, x, self.ff) if hasattr(self, "ff") else x


class TiedHeadBias(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab_size))


# ---- models -------------------------------------------------------------------

class Model(nn.Module):
    """All three shapes; parameter names as attnlab's (see models/*.h)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, V = cfg["d_model"], cfg["vocab_size"]
        pre = cfg["norm"] == "pre"
        self.tok_emb = nn.Embedding(V, d)
        if cfg["positional"] == "learned":
            self.pos_emb = nn.Embedding(cfg["max_len"], d)
        self.register_buffer("pe", sinusoidal_table(cfg["max_len"], d), persistent=False)
        arch = cfg["arch"]
        if arch == "encoder":
            self.blocks = nn.ModuleList([EncoderBlock(cfg) for _ in range(cfg["n_layers"])])
        elif arch == "decoder":
            # The decoder-only block is the encoder block run causally (same names).
            self.blocks = nn.ModuleList([EncoderBlock(cfg) for _ in range(cfg["n_layers"])])
        else:
            self.encoder = nn.Module()
            self.encoder.blocks = nn.ModuleList([EncoderBlock(cfg) for _ in range(cfg["n_layers"])])
            self.decoder = nn.Module()
            self.decoder.blocks = nn.ModuleList([DecoderBlock(cfg) for _ in range(cfg["n_layers"])])
            if pre:
                self.encoder.ln_f = nn.LayerNorm(d, eps=1e-5)
                self.decoder.ln_f = nn.LayerNorm(d, eps=1e-5)
        if pre and arch != "seq2seq":
            self.ln_f = nn.LayerNorm(d, eps=1e-5)
        bias = not cfg.get("no_bias", False)
        if cfg["tie_embeddings"]:
            self.head = TiedHeadBias(V) if bias else nn.Module()  # no_bias: a tied head has no parameters
        else:
            self.head = nn.Linear(d, V, bias=bias)

    def embed(self, ids, positions=None):
        """Token embeddings plus positions' (by default 0..T-1; an index or indices otherwise)."""
        h = self.tok_emb(ids)
        at = slice(0, ids.shape[1]) if positions is None else positions
        if self.cfg["positional"] == "learned":
            h = h + self.pos_emb.weight[at]
        elif self.cfg["positional"] == "sinusoidal":
            h = h + self.pe[at].to(h.dtype)
        return h

    def logits(self, h):
        if self.cfg["tie_embeddings"]:
            out = h @ self.tok_emb.weight.t()
            return out + self.head.bias if hasattr(self.head, "bias") else out
        return self.head(h)

    def forward(self, inp):
        arch = self.cfg["arch"]
        if arch in ("encoder", "decoder"):
            key = "src" if arch == "encoder" else "tgt_in"
            pad = inp.get(key + "_pad" if arch == "encoder" else "tgt_pad")
            h = self.embed(inp[key])
            for block in self.blocks:
                h = block(h, pad, causal=arch == "decoder")
            if hasattr(self, "ln_f"):
                h = self.ln_f(h)
            return self.logits(h)
        src_pad, tgt_pad = inp["src_pad"], inp["tgt_pad"]
        m = self.embed(inp["src"])
        for block in self.encoder.blocks:
            m = block(m, src_pad)
        if hasattr(self.encoder, "ln_f"):
            m = self.encoder.ln_f(m)
        h = self.embed(inp["tgt_in"])
        for block in self.decoder.blocks:
            h = block(h, tgt_pad, m, src_pad)
        if hasattr(self.decoder, "ln_f"):
            h = self.decoder.ln_f(h)
        return self.logits(h)


# ---- batches (mirrors models/batch.cpp) -----------------------------------------

def pad_rows(rows, fill):
    width = max(1, max(len(r) for r in rows))
    return [r + [fill] * (width - len(r)) for r in rows], [[0] * len(r) + [1] * (width - len(r)) for r in rows]


def format_batch(arch, pairs):
    out = {}
    if arch == "encoder":
        out["src"], out["src_pad"] = pad_rows([s for s, _ in pairs], PAD)
        width = len(out["src"][0])
        out["targets"] = [t + [IGNORE] * (width - len(t)) for _, t in pairs]
    elif arch == "decoder":
        seqs = [[BOS] + s + [SEP] + t for s, t in pairs]
        out["tgt_in"], out["tgt_pad"] = pad_rows(seqs, PAD)
        tg = [[IGNORE] * (len(s) + 1) + t + [EOS] for s, t in pairs]
        out["targets"], _ = pad_rows(tg, IGNORE)
    else:
        out["src"], out["src_pad"] = pad_rows([s for s, _ in pairs], PAD)
        out["tgt_in"], out["tgt_pad"] = pad_rows([[BOS] + t for _, t in pairs], PAD)
        out["targets"], _ = pad_rows([t + [EOS] for _, t in pairs], IGNORE)
    return out


# ---- fixtures -------------------------------------------------------------------

def init_weights(model, gen):
    """Fixed random float32 weights; LayerNorm affine terms perturbed so their gradients matter."""
    params = dict(model.named_parameters())
    for name, p in params.items():
        leaf = name.rsplit(".", 1)[-1]
        owner = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else ""
        if name == "tok_emb.weight":
            v = torch.randn(p.shape, generator=gen)
        elif name == "pos_emb.weight":
            v = 0.5 * torch.randn(p.shape, generator=gen)
        elif owner.startswith("ln"):
            v = (1.0 if leaf == "weight" else 0.0) + 0.2 * torch.randn(p.shape, generator=gen)
        else:  # Linear weight or bias: U(-1/sqrt(in), 1/sqrt(in)) as torch.nn.Linear
            w = params.get(name.rsplit(".", 1)[0] + ".weight")
            fan_in = w.shape[1] if (w is not None and w.dim() == 2 and name != "head.bias") else model.cfg["d_model"]
            bound = 1.0 / math.sqrt(fan_in)
            v = (torch.rand(p.shape, generator=gen) * 2 - 1) * bound
        with torch.no_grad():
            p.copy_(v.float().double())  # exactly representable in float32


def tensor_json(t, digits=9):
    flat = t.detach().reshape(-1).tolist()
    return {"shape": list(t.shape), "values": [float(f"{x:.{digits}g}") for x in flat]}


def int_json(rows):
    return {"shape": [len(rows), len(rows[0])], "values": [x for r in rows for x in r]}


def make_pairs(gen, arch, vocab_size, lengths):
    pairs = []
    for n_in, n_out in lengths:
        src = torch.randint(4, vocab_size, (n_in,), generator=gen).tolist()
        if arch == "encoder":
            tgt = list(reversed(src))[:n_out]
        else:
            tgt = torch.randint(4, vocab_size, (n_out,), generator=gen).tolist()
        pairs.append((src, tgt))
    return pairs


def base_config(**kw):
    cfg = dict(arch="encoder", vocab_size=11, max_len=16, d_model=8, n_heads=2, n_layers=2, d_ff=16, d_k=0, d_v=0,
               positional="sinusoidal", norm="pre", attn_scale="sqrt", activation="relu", dropout=0.0,
               attn_dropout=0.0, tie_embeddings=False, parameter_free_attention=False)
    cfg.update(kw)
    return cfg


CASES = [
    # name, config, label smoothing, (input length, output length) per sequence
    ("model_encoder_pre_sinusoidal", base_config(arch="encoder"), 0.0, [(5, 5), (3, 3), (4, 2)]),
    ("model_decoder_pre_rope", base_config(arch="decoder", positional="rope", activation="gelu"), 0.0,
     [(3, 3), (1, 2), (2, 1)]),
    ("model_seq2seq_post_learned_tied",
     base_config(arch="seq2seq", norm="post", positional="learned", tie_embeddings=True), 0.1,
     [(4, 3), (2, 4), (3, 1)]),
    ("model_seq2seq_pre_scale_none_dk_dv",
     base_config(arch="seq2seq", attn_scale="none", d_k=6, d_v=3, positional="none", activation="gelu"), 0.0,
     [(3, 2), (5, 4), (2, 3)]),
    # The papers' options: no LayerNorm (Nanda et al.), attention-only blocks (Olsson et al.), no biases.
    ("model_decoder_none_attention_only_no_bias",
     base_config(arch="decoder", norm="none", attention_only=True, no_bias=True, positional="learned"), 0.0,
     [(3, 3), (1, 2), (2, 1)]),
    ("model_seq2seq_none_no_bias_tied",
     base_config(arch="seq2seq", norm="none", no_bias=True, tie_embeddings=True, activation="gelu"), 0.0,
     [(4, 3), (2, 4), (3, 1)]),
    ("model_encoder_post_attention_only", base_config(arch="encoder", norm="post", attention_only=True), 0.0,
     [(5, 5), (3, 3), (4, 2)]),
]


def run_case(name, cfg, label_smoothing, lengths, seed):
    gen = torch.Generator().manual_seed(seed)
    model = Model(cfg).double()
    init_weights(model, gen)
    pairs = make_pairs(gen, cfg["arch"], cfg["vocab_size"], lengths)
    batch = format_batch(cfg["arch"], pairs)
    inp = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items() if k != "targets"}
    targets = torch.tensor(batch["targets"], dtype=torch.long)
    logits = model(inp)
    loss = F.cross_entropy(logits.reshape(-1, cfg["vocab_size"]), targets.reshape(-1), ignore_index=IGNORE,
                           label_smoothing=label_smoothing)
    loss.backward()
    named = list(model.named_parameters())
    return {
        "name": name,
        "config": cfg,
        "label_smoothing": label_smoothing,
        "pairs": [[s, t] for s, t in pairs],
        "inputs": {k: int_json(v) for k, v in batch.items()},
        "weights": {n: tensor_json(p) for n, p in named},
        "logits": tensor_json(logits),
        "loss": float(f"{loss.item():.12g}"),
        "grads": {n: tensor_json(p.grad) for n, p in named},
    }


def self_check():
    """Our attention against torch's own multi-head attention (standard case: sqrt scale, d_k = d/h, masks)."""
    gen = torch.Generator().manual_seed(7)
    cfg = base_config(d_model=8, n_heads=2)
    attn = MultiHeadAttention(cfg, rope=False).double()
    x = torch.randn(2, 5, 8, generator=gen, dtype=torch.float64)
    pad = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]], dtype=torch.bool)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    ours = attn(x, causal=True, key_padding=pad)
    w_in = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
    b_in = torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])
    theirs, _ = F.multi_head_attention_forward(
        x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), 8, 2, w_in, b_in, None, None, False, 0.0,
        attn.out_proj.weight, attn.out_proj.bias, key_padding_mask=pad, attn_mask=causal, need_weights=False)
    err = (ours - theirs.transpose(0, 1)).abs().max().item()
    assert err < 1e-12, f"attention differs from torch's multi_head_attention_forward by {err}"


BENCH_SHAPES = {  # V, T, d, h, L, d_ff, B (docs/benchmark.md)
    "S": (16, 16, 64, 4, 2, 256, 64),
    "M": (32, 32, 128, 8, 4, 512, 64),
    "L": (64, 64, 256, 8, 6, 1024, 32),
    "graph": (8, 2, 4, 1, 6, 4, 1),  # not part of the workload: the fixed cost of a step (see attnlab bench)
}


def bench(name, threads, blas_threads, steps, warmup, precision="fp32", seed=0):
    """Times training steps of docs/benchmark.md's encoder tagger; prints one JSON line.

    threads: torch's own (intra-op) threads; blas_threads: OpenBLAS's, pinned
    by pin_blas_threads. "threads" in the JSON line is the cores the run may
    use, the larger of the two, so that it compares with attnlab's --threads.
    precision bf16: forward and loss under torch.autocast("cpu", bfloat16), the
    field's mixed precision on CPU (products in bf16 on oneDNN, weights and
    optimizer in fp32), as attnlab's --precision bf16.
    """
    import resource
    import time
    torch.set_num_threads(threads)
    V, T, d, h, L, d_ff, B = BENCH_SHAPES[name]
    steps = steps or {"S": 200, "M": 20, "L": 5, "graph": 2000}[name]
    torch.manual_seed(seed)
    model = Model(base_config(vocab_size=V, max_len=T, d_model=d, n_heads=h, n_layers=L, d_ff=d_ff))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed + 1)
    batches = []
    for _ in range(4):
        x = torch.randint(0, V, (B, T), generator=gen)
        batches.append(({"src": x}, x.flip(1)))  # no padding: no mask
    times = []
    for step in range(warmup + steps):
        inp, y = batches[step % len(batches)]
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(model(inp).reshape(-1, V).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        if step >= warmup:
            times.append(time.perf_counter() - t)
    times.sort()
    median = times[len(times) // 2]
    tokens_per_s = B * T / median
    flops_fwd = L * (8 * d * d + 4 * d * d_ff + 4 * T * d) + 2 * d * V
    print(json.dumps({
        "impl": "pytorch", "torch": torch.__version__, "config": name, "threads": max(threads, blas_threads),
        "torch_threads": threads, "blas_threads": blas_threads, "blas_kernels": openblas_kernels(), "steps": steps,
        "precision": precision, "step_ms": median * 1e3, "tokens_per_s": tokens_per_s,
        "params": sum(p.numel() for p in model.parameters()),
        "gflops": 3 * flops_fwd * tokens_per_s / 1e9, "final_loss": loss.item(),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))


# ---- KV-cached greedy decoding (the PyTorch side of `attnlab bench --decode`) ------

def rotary_at(x, pos, base=10000.0):
    """rotary() for x (..., 1, d_k) standing at position pos."""
    d_k = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angle = pos * inv_freq
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def cached_self_attention(attn, x, cache, pos):
    """x (B, 1, d) at position pos; cache {"k", "v"}: (B, h, pos, d_k|d_v), grown here."""
    b = x.shape[0]
    q = attn.q_proj(x).view(b, 1, attn.h, attn.d_k).transpose(1, 2)  # (B, h, 1, d_k)
    k = attn.k_proj(x).view(b, 1, attn.h, attn.d_k).transpose(1, 2)
    v = attn.v_proj(x).view(b, 1, attn.h, attn.d_v).transpose(1, 2)
    if attn.rope:
        q, k = rotary_at(q, pos), rotary_at(k, pos)
    cache["k"] = k if "k" not in cache else torch.cat([cache["k"], k], dim=2)
    cache["v"] = v if "v" not in cache else torch.cat([cache["v"], v], dim=2)
    w = torch.softmax((q @ cache["k"].transpose(-1, -2)) * attn.scale, dim=-1)  # (B, h, 1, pos + 1)
    return attn.out_proj((w @ cache["v"]).transpose(1, 2).reshape(b, 1, attn.h * attn.d_v))


def greedy_decoder_cached(model, prompts, new_tokens):
    """Greedy continuation of equal-length prompts ([bos] src [sep]) by the decoder LM,
    one position per step as attnlab's greedy_cached (the prompt too); returns (B, new_tokens)."""
    ids = torch.tensor(prompts)
    b, p_len = ids.shape
    caches = [{} for _ in model.blocks]
    out = []
    token = ids[:, :1]
    for pos in range(p_len + new_tokens - 1):
        h = model.embed(token, pos)
        for block, cache in zip(model.blocks, caches):
            if block.pre:
                h = h + cached_self_attention(block.attn, block.ln1(h), cache, pos)
                h = h + block.ff(block.ln2(h))
            else:
                h = block.ln1(h + cached_self_attention(block.attn, h, cache, pos))
                h = block.ln2(h + block.ff(h))
        if hasattr(model, "ln_f"):
            h = model.ln_f(h)
        if pos + 1 < p_len:
            token = ids[:, pos + 1:pos + 2]
            continue
        token = model.logits(h).argmax(-1)  # (B, 1)
        out.append(token)
    return torch.cat(out, dim=1)


def greedy_decoder_uncached(model, prompts, new_tokens):
    """The same answers by a full forward over the whole prefix for every token."""
    ids = torch.tensor(prompts)
    for _ in range(new_tokens):
        nxt = model({"tgt_in": ids, "tgt_pad": None})[:, -1:].argmax(-1)
        ids = torch.cat([ids, nxt], dim=1)
    return ids[:, len(prompts[0]):]


def bench_decode(name, threads, blas_threads, reps, seed=0):
    """Times KV-cached greedy decoding as `attnlab bench --decode --config NAME`: random prompts
    [bos] src [sep] of T/2 positions, T/2 new tokens, eos forbidden; prints one JSON line."""
    import resource
    import time
    torch.set_num_threads(threads)
    V, T, d, h, L, d_ff, B = BENCH_SHAPES[name]
    torch.manual_seed(seed)
    model = Model(base_config(arch="decoder", vocab_size=V, max_len=T, d_model=d, n_heads=h, n_layers=L, d_ff=d_ff))
    model.eval()
    with torch.no_grad():
        model.head.bias[EOS] = -1e9
    gen = torch.Generator().manual_seed(seed + 1)
    src_len, new_tokens = T // 2 - 2, T - T // 2
    prompts = [[BOS] + torch.randint(4, V, (src_len,), generator=gen).tolist() + [SEP] for _ in range(B)]
    times = []
    with torch.no_grad():
        answers = greedy_decoder_cached(model, prompts, new_tokens)  # warm-up
        for _ in range(reps):
            t = time.perf_counter()
            answers = greedy_decoder_cached(model, prompts, new_tokens)
            times.append(time.perf_counter() - t)
        equal = bool(torch.equal(answers, greedy_decoder_uncached(model, prompts, new_tokens)))
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({
        "impl": "pytorch", "torch": torch.__version__, "mode": "decode", "config": name, "arch": "decoder",
        "threads": max(threads, blas_threads), "torch_threads": threads, "blas_threads": blas_threads,
        "blas_kernels": openblas_kernels(), "batch": B, "src_len": src_len, "new_tokens": new_tokens,
        "generated": B * new_tokens, "ms": median * 1e3, "tokens_per_s": B * new_tokens / median,
        "answers_equal": equal,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tests/data", help="directory for the model_*.json fixtures")
    ap.add_argument("--bench", choices=sorted(BENCH_SHAPES), help="time the benchmark model instead")
    ap.add_argument("--threads", type=int, default=1, help="--bench: torch threads")
    ap.add_argument("--blas-threads", type=int, default=0, help="--bench: OpenBLAS threads (0: as --threads)")
    ap.add_argument("--steps", type=int, default=0, help="--bench: timed steps (0: 200 S, 20 M, 5 L)")
    ap.add_argument("--warmup", type=int, default=5, help="--bench: untimed steps first")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="--bench: fp32, or bf16 mixed precision (torch.autocast on the CPU)")
    ap.add_argument("--decode", action="store_true",
                    help="--bench: time KV-cached greedy decoding of the decoder LM instead (as attnlab bench --decode)")
    args = ap.parse_args()
    if args.bench and args.decode:
        blas_threads = args.blas_threads or args.threads
        if os.environ.get("OPENBLAS_NUM_THREADS") != str(blas_threads):
            sys.exit("torch_reference: OPENBLAS_NUM_THREADS was not pinned before torch loaded")
        bench_decode(args.bench, args.threads, blas_threads, args.steps or 3)
        return
    if args.bench:
        blas_threads = args.blas_threads or args.threads
        if os.environ.get("OPENBLAS_NUM_THREADS") != str(blas_threads):
            sys.exit("torch_reference: OPENBLAS_NUM_THREADS was not pinned before torch loaded")
        bench(args.bench, args.threads, blas_threads, args.steps, args.warmup, args.precision)
        return
    self_check()
    os.makedirs(args.out, exist_ok=True)
    for i, (name, cfg, ls, lengths) in enumerate(CASES):
        fixture = run_case(name, cfg, ls, lengths, seed=1000 + i)
        path = os.path.join(args.out, name + ".json")
        with open(path, "w") as f:
            json.dump(fixture, f, separators=(",", ":"))
            f.write("\n")
        print(f"{path}: {len(fixture['weights'])} parameters, loss {fixture['loss']:.6f}, "
              f"{os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
