#!/usr/bin/env python3
"""Train docs/benchmark.md's encoder tagger on `reverse` in plain PyTorch, to the
held-out target, and report the number of steps it needed.

The PyTorch side of the step-count comparison in docs/experiments.md. The model,
data and training mirror what

    attnlab train --task reverse --vocab 12 --min-len 16 --max-len 16 --model encoder \
        --d-model 64 --heads 4 --layers 2 --d-ff 256 --batch-size 64 --lr 1e-3 \
        --weight-decay 0.01 --clip 0 --target 0.99 --eval-every 25 --threads 1

does, written from scratch here (no nn.Transformer):

- model (docs/benchmark.md, "S"): h0 = Embedding(V, d)[x] + sinusoidal PE; L pre-LN
  blocks x += MHSA(LN(x)); x += W2 ReLU(W1 LN(x) + b1) + b2; final LayerNorm;
  Linear(d, V). Every Linear has a bias, LayerNorm eps 1e-5, no mask, no dropout.
  PyTorch's default initialisation (Linear U(+-1/sqrt(fan_in)) for weight and
  bias, Embedding N(0, 1), LayerNorm 1/0), which is also attnlab's.
- data: V = 4 specials + `--symbols` task symbols (ids 4 .. V-1, as attnlab's
  vocabulary lays them out; the specials never occur in reverse at a fixed
  length); inputs uniform random, target = input reversed. A held-out set of
  `--heldout` distinct inputs from its own generator; training batches skip any
  input that is held out (attnlab's TrainStream does the same).
- loss: mean cross-entropy over B*T; AdamW lr 1e-3, betas (0.9, 0.999),
  eps 1e-8, weight decay 0.01, constant lr, no clipping.
- weight decay groups: by default as attnlab's default (no decay on biases,
  LayerNorm and embeddings; decay on every other weight); `--decay-all` decays
  every parameter (torch.optim.AdamW's behaviour on model.parameters(), and
  attnlab's --decay-all).
- held-out exact match: argmax at every position, a sequence counts when all
  T positions are right; measured every `--eval-every` steps; the run stops at
  the first evaluation that reaches `--target`.

Prints one JSON line per seed: {"seed", "solved_at_step" (null if not
reached), "steps", "heldout_exact", "seconds" (wall), "cpu_seconds",
"parameters", "decay"}.

    /usr/bin/python3 scripts/pytorch/torch_train_reverse.py --seeds 0 1 2
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from attnlab_runs.mirror import no_decay

N_SPECIALS = 4  # <pad> <bos> <eos> <sep>, as datasets/vocab.h


def sinusoidal_table(max_len, d):
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2)
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * inv_freq)
    pe[:, 1::2] = torch.cos(pos * inv_freq)
    return pe.float()


class SelfAttention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.d_k = h, d // h
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):  # x (B, T, d)
        b, t, d = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
        k = self.k_proj(x).view(b, t, self.h, self.d_k).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.h, self.d_k).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.d_k), dim=-1)  # (B, h, T, T)
        return self.out_proj((w @ v).transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d, h, d_ff):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = SelfAttention(d, h)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.ff = FeedForward(d, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ff(self.ln2(x))


class EncoderTagger(nn.Module):
    """Parameter names as attnlab's (tok_emb.weight, blocks.0.attn.q_proj.weight,
    blocks.0.ff.fc1.weight, ln_f.weight, head.weight, ...), so an attnlab
    checkpoint loads with load_state_dict (docs/quickstart.md)."""

    def __init__(self, vocab, max_len, d, h, n_layers, d_ff):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.register_buffer("pe", sinusoidal_table(max_len, d), persistent=False)
        self.blocks = nn.ModuleList([Block(d, h, d_ff) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):  # ids (B, T) -> logits (B, T, V)
        x = self.tok_emb(ids) + self.pe[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def draw(gen, n, length, symbols):
    return torch.randint(N_SPECIALS, N_SPECIALS + symbols, (n, length), generator=gen)


def make_heldout(seed, n, length, symbols):
    gen = torch.Generator().manual_seed(seed)
    seen, rows = set(), []
    while len(rows) < n:
        for row in draw(gen, n, length, symbols):
            key = tuple(row.tolist())
            if key not in seen and len(rows) < n:
                seen.add(key)
                rows.append(row)
    return torch.stack(rows), seen


def train_batch(gen, batch, length, symbols, heldout_keys):
    x = draw(gen, batch, length, symbols)
    keep = [i for i, row in enumerate(x) if tuple(row.tolist()) not in heldout_keys]
    while len(keep) < batch:  # practically never at these sizes; kept exact anyway
        row = draw(gen, 1, length, symbols)[0]
        if tuple(row.tolist()) not in heldout_keys:
            x = torch.cat([x[keep], row[None]])
            keep = list(range(len(x)))
    return x[keep[:batch]]


@torch.no_grad()
def exact_match(model, x):
    model.eval()
    pred = model(x).argmax(-1)
    model.train()
    return (pred == x.flip(1)).all(1).float().mean().item()


def run(args, seed):
    torch.manual_seed(seed)
    vocab = N_SPECIALS + args.symbols
    model = EncoderTagger(vocab, args.length, args.d_model, args.heads, args.layers, args.d_ff)
    named = list(model.named_parameters())
    if args.decay_all:
        groups = [{"params": [p for _, p in named], "weight_decay": args.weight_decay}]
    else:
        groups = [
            {"params": [p for n, p in named if not no_decay(n)], "weight_decay": args.weight_decay},
            {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0},
        ]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    heldout, keys = make_heldout(1_000_003 + seed, args.heldout, args.length, args.symbols)
    gen = torch.Generator().manual_seed(2_000_003 + seed)

    start, cpu_start = time.perf_counter(), time.process_time()
    solved, exact, step = None, 0.0, 0
    for step in range(1, args.steps + 1):
        x = train_batch(gen, args.batch_size, args.length, args.symbols, keys)  # (B, T)
        logits = model(x)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, vocab), x.flip(1).reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % args.eval_every == 0 or step == args.steps:
            exact = exact_match(model, heldout)
            if args.verbose:
                print(f"seed {seed} step {step}: loss {loss.item():.4f}, held-out exact {exact:.3f}", file=sys.stderr)
            if exact >= args.target:
                solved = step
                break
    return {
        "seed": seed,
        "solved_at_step": solved,
        "steps": step,
        "heldout_exact": exact,
        "seconds": round(time.perf_counter() - start, 3),
        "cpu_seconds": round(time.process_time() - cpu_start, 3),
        "parameters": sum(p.numel() for p in model.parameters()),
        "decay": "all" if args.decay_all else "weights only (no biases, LayerNorm, embeddings)",
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--symbols", type=int, default=12, help="task symbols; V = 4 + symbols (12 -> V = 16)")
    p.add_argument("--length", type=int, default=16)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--decay-all", action="store_true", help="decay every parameter (biases, LayerNorm, embeddings too)")
    p.add_argument("--steps", type=int, default=5000, help="give up after this many steps")
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--heldout", type=int, default=500)
    p.add_argument("--target", type=float, default=0.99)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--verbose", action="store_true", help="print loss and held-out exact match at every evaluation (stderr)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        print(json.dumps(run(args, seed)), flush=True)


if __name__ == "__main__":
    main()
