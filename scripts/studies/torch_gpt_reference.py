#!/usr/bin/env python3
"""A PyTorch decoder-only GPT trained on attnlab's sequence tasks: the reference of the learning-speed study.

Written from the math, independently of attnlab's code (and of scripts/pytorch/attnlab_torch.py),
to be the same model, data and training as `attnlab train --model decoder`:

  model     tokens [bos] src [sep] tgt (--layout bare: src tgt, no special tokens), embedded (tok_emb)
            plus positions (pos_emb learned, or the sinusoidal table, or none); L blocks,
            pre-LN  x + attn(ln1 x), x + ff(ln2 x)  then ln_f,
            or post-LN  ln1(x + attn x), ln2(x + ff x); causal multi-head attention with q, k, v and
            out projections (all with biases), scores scaled by 1/sqrt(d_k); feed-forward fc1, relu or
            exact-erf gelu, fc2; a head Linear(d, V) with bias, or tied to tok_emb (then its bias only);
            layer norms with eps 1e-5. Parameter names are attnlab's (blocks.0.attn.q_proj.weight ...).
  loss      cross-entropy averaged over the answer tokens and <eos> of the whole batch: the input
            [bos] src [sep] tgt predicts src's and sep's successors too, but those are not targets.
            --layout bare (minGPT's adder): the input src tgt[:-1], the targets the answer's tokens only.
  init      torch: the PyTorch module defaults (Linear U(+-1/sqrt(fan_in)) weights and biases,
            Embedding N(0, 1)), learned positions N(0, 0.02), LayerNorm 1 / 0.
            gpt2: every Linear weight N(0, 0.02) except the residual outputs (attn.out_proj, ff.fc2)
            N(0, 0.02 / sqrt(2 L)); tok_emb and pos_emb N(0, 0.02); biases 0; LayerNorm 1 / 0.
  optimizer AdamW with decoupled decay on the weight matrices only (no decay on biases, layer norms
            and embeddings, attnlab's default groups), global gradient-norm clipping, the lr schedule
            constant | linear | cosine (decay over --steps to --min-lr) after a linear warmup.
  data      the task's inputs uniform (symbol ids 4 .. 4 + vocab - 1; add: digits 4-13, '+' 14);
            pairs: the lines input<TAB>output of --file, one token per character (ids 4 .. in sorted
            order of the characters), --heldout distinct inputs held out, the rest drawn uniformly;
            --heldout distinct inputs drawn from their own generator, and a training stream that
            rejects every held-out input, so the two never share an input. pairs --heldout-file
            (attnlab's option): the held-out pairs are that file's lines, the same for every seed,
            and training draws uniformly from the --file inputs not in it.
  score     held-out exact match by greedy decoding after [bos] src [sep]: at most len(answer) + 1
            tokens, stopping at <eos>; exact when the decoded tokens before <eos> are the answer.
            --layout bare: after src, exactly len(answer) tokens (no <eos>), as minGPT's adder decodes.
  target    training stops when held-out exact match >= --target at --target-patience consecutive
            evaluations (every --eval-every steps and at the last); solved_at_step is the first of them.

Not the same random numbers as attnlab, so runs are compared as distributions over seeds.
Dropout is not implemented (the study runs without it).

    /usr/bin/python3 scripts/studies/torch_gpt_reference.py --task sort --vocab 3 --min-len 6 --max-len 6 \\
        --d-model 48 --heads 3 --layers 3 --d-ff 192 --positional learned --init gpt2 --seed 0

Prints one JSON line: parameters, solved_at_step (null when not solved), steps, heldout_exact,
evals ([step, held-out exact] pairs), seconds and cpu_seconds of the training loop.
Exit 2 with one line on stderr for a bad option.
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import time

from attnlab_runs.files import held_step
from attnlab_runs.mirror import no_decay

PAD, BOS, EOS, SEP, FIRST_SYMBOL = 0, 1, 2, 3, 4
IGNORE = -100
HELDOUT = 500  # held-out inputs drawn per seed when neither --heldout nor --heldout-file is given
TASKS = ("copy", "reverse", "sort", "add", "pairs")


def read_pairs(path):
    """[(line number, input, output)] of a file of input<TAB>output lines, in file order: blank lines skipped,
    a repeated line kept once. ValueError naming the file and line for a line without exactly one tab, an
    empty side, or an input given a second output; and for a file without pairs."""
    pairs, seen = [], {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            if line.count("\t") != 1:
                raise ValueError(f"{path} line {number}: expected input<TAB>output, found {line.count(chr(9))} tabs")
            a, b = line.split("\t")
            if not a or not b:
                raise ValueError(f"{path} line {number}: the {'input' if not a else 'output'} is empty")
            if a in seen and seen[a][1] != b:
                raise ValueError(f"{path} line {number}: the input {a!r} already appeared on line {seen[a][0]} "
                                 "with a different output")
            if a not in seen:
                seen[a] = (number, b)
                pairs.append((number, a, b))
    if not pairs:
        raise ValueError(f"{path}: no input<TAB>output lines")
    return pairs


class Task:
    """copy, reverse, sort: `vocab` symbols, lengths min_len..max_len; add: two `digits`-digit operands;
    pairs: the (input, output) lines of a file, a token per character, and with heldout_file the held-out
    pairs of that file (`heldout_pairs`; their characters must occur in `file`)."""

    def __init__(self, name, vocab, min_len, max_len, digits, file=None, heldout_file=None):
        self.name = name
        self.vocab, self.min_len, self.max_len, self.digits = vocab, min_len, max_len, digits
        self.vocab_size = FIRST_SYMBOL + (11 if name == "add" else vocab)
        self.heldout_pairs = None
        if name == "pairs":
            lines = read_pairs(file)
            chars = sorted({c for _, a, b in lines for c in a + b})
            ids = {c: FIRST_SYMBOL + i for i, c in enumerate(chars)}
            self.table = {tuple(ids[c] for c in a): [ids[c] for c in b] for _, a, b in lines}
            self.inputs = sorted(self.table)
            self.vocab_size = FIRST_SYMBOL + len(chars)
            if heldout_file:
                self.heldout_pairs = []
                for number, a, b in read_pairs(heldout_file):
                    missing = next((c for c in a + b if c not in ids), None)
                    if missing is not None:
                        raise ValueError(f"{heldout_file} line {number}: the character {missing!r} is not in {file}")
                    self.heldout_pairs.append(([ids[c] for c in a], [ids[c] for c in b]))

    def sample_input(self, rng):
        if self.name == "pairs":
            return list(rng.choice(self.inputs))
        if self.name == "add":
            d = self.digits
            return [FIRST_SYMBOL + 10 if i == d else FIRST_SYMBOL + rng.randint(0, 9) for i in range(2 * d + 1)]
        n = rng.randint(self.min_len, self.max_len)
        return [FIRST_SYMBOL + rng.randint(0, self.vocab - 1) for _ in range(n)]

    def solve(self, src):
        if self.name == "pairs":
            return list(self.table[tuple(src)])
        if self.name == "copy":
            return list(src)
        if self.name == "reverse":
            return src[::-1]
        if self.name == "sort":
            return sorted(src)
        d = self.digits  # add: the sum's d + 1 digits, most significant first
        a = int("".join(str(t - FIRST_SYMBOL) for t in src[:d]))
        b = int("".join(str(t - FIRST_SYMBOL) for t in src[d + 1:]))
        return [FIRST_SYMBOL + int(c) for c in str(a + b).zfill(d + 1)]

    def max_input_len(self):
        if self.name == "pairs":
            return max(len(s) for s in self.inputs + [tuple(s) for s, _ in self.heldout_pairs or []])
        return 2 * self.digits + 1 if self.name == "add" else self.max_len

    def max_output_len(self):
        if self.name == "pairs":
            return max(len(t) for t in list(self.table.values()) + [t for _, t in self.heldout_pairs or []])
        return self.digits + 1 if self.name == "add" else self.max_len

    def input_space_size(self):
        if self.name == "pairs":
            return len(self.inputs)
        if self.name == "add":
            return 10 ** (2 * self.digits)
        return sum(self.vocab ** n for n in range(self.min_len, self.max_len + 1))


def make_heldout(task, n, seed):
    """min(n, inputs that exist) distinct (input, answer) pairs from their own generator; a pairs task with a
    held-out file: that file's pairs (n and seed unused)."""
    if task.heldout_pairs is not None:
        return [(list(s), list(t)) for s, t in task.heldout_pairs]
    rng, seen, out = random.Random(f"heldout-{seed}"), set(), []
    while len(out) < min(n, task.input_space_size()):
        src = task.sample_input(rng)
        if tuple(src) not in seen:
            seen.add(tuple(src))
            out.append((src, task.solve(src)))
    return out


class TrainStream:
    """Training pairs from their own generator, never one whose input is held out."""

    def __init__(self, task, heldout, seed):
        held = {tuple(s) for s, _ in heldout}
        left = sum(s not in held for s in task.inputs) if task.name == "pairs" else task.input_space_size() - len(held)
        if left <= 0:
            raise ValueError(f"the held-out set holds all {task.input_space_size()} {task.name} inputs")
        self.task, self.held, self.rng = task, held, random.Random(f"train-{seed}")

    def next_batch(self, n):
        batch = []
        while len(batch) < n:
            src = self.task.sample_input(self.rng)
            if tuple(src) not in self.held:
                batch.append((src, self.task.solve(src)))
        return batch


def pad_rows(torch, rows, fill):
    """Right-padded (len(rows), longest) tensor of the rows."""
    out = torch.full((len(rows), max(len(r) for r in rows)), fill, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def lm_batch(torch, pairs, layout="special"):
    """[bos] src [sep] tgt as input; targets: ignored for src and sep, then tgt and <eos>. (B, T) each.
    layout bare: src tgt[:-1] as input; targets: ignored but for the last src position, then tgt.

    Right padding needs no mask: a causal position never sees the padding after it, and padded
    positions are not targets."""
    if layout == "bare":
        inputs = [s + t[:-1] for s, t in pairs]
        targets = [[IGNORE] * (len(s) - 1) + t for s, t in pairs]
    else:
        inputs = [[BOS] + s + [SEP] + t for s, t in pairs]
        targets = [[IGNORE] * (len(s) + 1) + t + [EOS] for s, t in pairs]
    return pad_rows(torch, inputs, PAD), pad_rows(torch, targets, IGNORE)


def sinusoidal_table(torch, positions, d):
    """pe[p, c] = sin(p w_c) for even c, cos(p w_c) for odd c, w_c = 10000^(-(c - c % 2) / d). (P, d)"""
    p = torch.arange(positions, dtype=torch.float64)[:, None]
    c = torch.arange(d)
    angle = p * torch.pow(10000.0, -(c - c % 2).double() / d)[None, :]
    return torch.where(c % 2 == 0, torch.sin(angle), torch.cos(angle)).float()


def build_model(torch, cfg):
    """The decoder as torch modules (defined here so that importing this file needs no torch)."""
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.h, self.d_k = cfg.heads, cfg.d_model // cfg.heads
            self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(cfg.d_model, cfg.d_model)
                                                                    for _ in range(4))

        def forward(self, x):  # (B, T, d)
            b, t, d = x.shape
            q, k, v = (p(x).view(b, t, self.h, self.d_k).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_k)  # (B, h, T, T)
            future = torch.ones(t, t, dtype=torch.bool).triu(1)
            w = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
            return self.out_proj((w @ v).transpose(1, 2).reshape(b, t, d))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(cfg.d_model, cfg.d_ff), nn.Linear(cfg.d_ff, cfg.d_model)

        def forward(self, x):
            h = self.fc1(x)
            return self.fc2(F.relu(h) if cfg.activation == "relu" else F.gelu(h))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(cfg.d_model, eps=1e-5), Attention()
            self.ln2, self.ff = nn.LayerNorm(cfg.d_model, eps=1e-5), FeedForward()

        def forward(self, x):
            if cfg.norm == "pre":
                x = x + self.attn(self.ln1(x))
                return x + self.ff(self.ln2(x))
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.ff(x))

    class Head(nn.Module):
        def __init__(self, vocab_size):
            super().__init__()
            if not cfg.tie_embeddings:
                self.weight = nn.Parameter(torch.empty(vocab_size, cfg.d_model))
            self.bias = nn.Parameter(torch.empty(vocab_size))

    class GPT(nn.Module):
        def __init__(self, vocab_size, positions):
            super().__init__()
            self.tok_emb = nn.Embedding(vocab_size, cfg.d_model)
            if cfg.positional == "learned":
                self.pos_emb = nn.Embedding(positions, cfg.d_model)
            elif cfg.positional == "sinusoidal":
                self.register_buffer("sin_table", sinusoidal_table(torch, positions, cfg.d_model), persistent=False)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.layers))
            if cfg.norm == "pre":
                self.ln_f = nn.LayerNorm(cfg.d_model, eps=1e-5)
            self.head = Head(vocab_size)

        def forward(self, ids):  # (B, T) -> (B, T, V)
            t = ids.shape[1]
            h = self.tok_emb(ids)
            if cfg.positional == "learned":
                h = h + self.pos_emb.weight[:t]
            elif cfg.positional == "sinusoidal":
                h = h + self.sin_table[:t]
            for block in self.blocks:
                h = block(h)
            if cfg.norm == "pre":
                h = self.ln_f(h)
            w = self.tok_emb.weight if cfg.tie_embeddings else self.head.weight
            return h @ w.t() + self.head.bias

    return GPT


def read_safetensors(torch, path):
    """{name: float32 tensor} of a safetensors file such as an attnlab checkpoint (8-byte header length, JSON
    header, raw data): the weights by the names the reference shares."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        dtype = {"F32": torch.float32, "F64": torch.float64}[info["dtype"]]
        out[name] = torch.frombuffer(bytearray(data[b:e]), dtype=dtype).reshape(info["shape"]).float()
    return out


def initialise(torch, model, scheme, layers, gen):
    """Every parameter by its name, from one generator, in named_parameters() order."""
    residual_std = 0.02 / math.sqrt(2 * layers)
    d = model.tok_emb.weight.shape[1]
    with torch.no_grad():
        for name, p in model.named_parameters():
            parts = name.split(".")
            owner = dict(model.named_modules())[".".join(parts[:-1])]
            if isinstance(owner, torch.nn.LayerNorm):
                p.fill_(1.0 if parts[-1] == "weight" else 0.0)
            elif parts[0] == "pos_emb":
                p.normal_(0.0, 0.02, generator=gen)
            elif parts[0] == "tok_emb":
                p.normal_(0.0, 1.0 if scheme == "torch" else 0.02, generator=gen)
            elif scheme == "torch":  # Linear and head: U(+-1/sqrt(fan_in)), weights and biases
                fan_in = d if parts[0] == "head" else owner.weight.shape[1]
                bound = 1.0 / math.sqrt(fan_in)
                p.uniform_(-bound, bound, generator=gen)
            elif parts[-1] == "bias":
                p.zero_()
            else:
                residual = parts[-2] in ("out_proj", "fc2")
                p.normal_(0.0, residual_std if residual else 0.02, generator=gen)


def scheduled_lr(cfg, step):
    """The lr of optimizer step `step` (1-based): linear warmup, then constant | linear | cosine to min_lr."""
    k, w = float(step), float(cfg.warmup)
    if step <= cfg.warmup:
        return cfg.lr * k / w
    if cfg.schedule == "constant":
        return cfg.lr
    q = min(max((k - w) / (cfg.steps - w), 0.0), 1.0)
    shape = 1 - q if cfg.schedule == "linear" else 0.5 * (1 + math.cos(math.pi * q))
    return cfg.min_lr + (cfg.lr - cfg.min_lr) * shape


def greedy_exact(torch, model, heldout, layout="special"):
    """Fraction of held-out pairs whose greedy answer (before <eos>, at most len + 1 tokens; bare:
    exactly len tokens, after the bare input) is right."""
    bare = layout == "bare"
    model.eval()
    right = 0
    with torch.no_grad():
        for begin in range(0, len(heldout), 256):
            part = heldout[begin:begin + 256]
            seqs = [list(s) if bare else [BOS] + s + [SEP] for s, _ in part]
            outs, done = [[] for _ in part], [False] * len(part)
            for _ in range(max(len(t) for _, t in part) + (0 if bare else 1)):
                active = [i for i in range(len(part)) if not done[i]]
                if not active:
                    break
                lengths = [len(seqs[i]) for i in active]
                logits = model(pad_rows(torch, [seqs[i] for i in active], PAD))  # (B', T, V)
                for row, i in enumerate(active):
                    tok = int(logits[row, lengths[row] - 1].argmax())
                    if tok == EOS and not bare:
                        done[i] = True
                        continue
                    outs[i].append(tok)
                    seqs[i].append(tok)
                    done[i] = len(outs[i]) >= len(part[i][1]) + (0 if bare else 1)
            right += sum(outs[i] == part[i][1] for i in range(len(part)))
    model.train()
    return right / len(heldout) if heldout else 0.0


def needed_positions(task, cfg):
    """[bos] src [sep] tgt; bare: src tgt[:-1]."""
    return task.max_input_len() + task.max_output_len() + (-1 if cfg.layout == "bare" else 2)


def positions_for(task, cfg):
    needed = needed_positions(task, cfg)
    return cfg.positions if cfg.positions > 0 else max(64, 2 * needed)


def make_optimizer(torch, model, cfg):
    """(AdamW over attnlab's decay groups, every parameter in named_parameters() order)."""
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": cfg.weight_decay},
              {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, foreach=True)
    return opt, [p for _, p in named]


def train_step(torch, model, opt, params, cfg, pairs, step):
    """One optimizer step (1-based `step`) on the (input, answer) pairs; returns the loss tensor."""
    x, y = lm_batch(torch, pairs, cfg.layout)
    logits = model(x)  # (B, T, V)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=IGNORE)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.clip > 0:
        torch.nn.utils.clip_grad_norm_(params, cfg.clip)
    for g in opt.param_groups:
        g["lr"] = scheduled_lr(cfg, step)
    opt.step()
    return loss


def train(cfg, log=None):
    """Trains one run; returns the JSON-able result."""
    import torch
    torch.set_num_threads(cfg.threads)
    task = Task(cfg.task, cfg.vocab, cfg.min_len, cfg.max_len, cfg.digits, cfg.file, cfg.heldout_file)
    heldout = make_heldout(task, heldout_count(cfg), cfg.seed)
    stream = TrainStream(task, heldout, cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    model = build_model(torch, cfg)(task.vocab_size, positions_for(task, cfg))
    initialise(torch, model, cfg.init, cfg.layers, gen)
    opt, params = make_optimizer(torch, model, cfg)
    evals, solved = [], None
    wall0, cpu0 = time.perf_counter(), time.process_time()
    step = 0
    for step in range(1, cfg.steps + 1):
        loss = train_step(torch, model, opt, params, cfg, stream.next_batch(cfg.batch_size), step)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            evals.append([step, greedy_exact(torch, model, heldout, cfg.layout)])
            if log:
                log(f"step {step} loss {loss.item():.4f} held-out exact {evals[-1][1]:.4f}")
            solved = held_step(evals, cfg.target, cfg.target_patience) if cfg.target > 0 else None
            if solved is not None:
                break
    return {"implementation": "pytorch", "task": cfg.task, "layout": cfg.layout, "init": cfg.init, "seed": cfg.seed,
            "parameters": sum(p.numel() for p in params), "target": cfg.target,
            "target_patience": cfg.target_patience, "solved_at_step": solved, "steps": step,
            "heldout_exact": evals[-1][1] if evals else 0.0, "heldout_size": len(heldout), "evals": evals,
            "seconds": round(time.perf_counter() - wall0, 2), "cpu_seconds": round(time.process_time() - cpu0, 2)}


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    a = p.add_argument
    a("--task", choices=TASKS, default="reverse")
    a("--vocab", type=int, default=10, help="task symbols (copy, reverse, sort)")
    a("--min-len", type=int, default=8)
    a("--max-len", type=int, default=8)
    a("--digits", type=int, default=3, help="add: digits per operand")
    a("--file", default=None, help="pairs: a file of input<TAB>output lines (a token per character)")
    a("--layout", choices=["special", "bare"], default="special",
      help="special: [bos] input [sep] answer [eos]; bare: input answer, loss on the answer only")
    a("--model", choices=["decoder"], default="decoder", help="only the decoder-only LM")
    a("--d-model", type=int, default=64)
    a("--heads", type=int, default=4)
    a("--layers", type=int, default=2)
    a("--d-ff", type=int, default=256)
    a("--positional", choices=["sinusoidal", "learned", "none"], default="sinusoidal")
    a("--positions", type=int, default=0, help="positional table size; 0 = max(64, 2 x the longest sequence)")
    a("--norm", choices=["pre", "post"], default="pre")
    a("--activation", choices=["relu", "gelu"], default="relu")
    a("--tie-embeddings", action="store_true")
    a("--init", choices=["torch", "gpt2"], default="torch")
    a("--lr", type=float, default=1e-3)
    a("--beta1", type=float, default=0.9)
    a("--beta2", type=float, default=0.999)
    a("--eps", type=float, default=1e-8)
    a("--weight-decay", type=float, default=0.01)
    a("--schedule", choices=["constant", "linear", "cosine"], default="constant")
    a("--warmup", type=int, default=0)
    a("--min-lr", type=float, default=0.0)
    a("--clip", type=float, default=1.0, help="global gradient-norm clip; 0 = off")
    a("--batch-size", type=int, default=64)
    a("--steps", type=int, default=2000, help="step cap")
    a("--eval-every", type=int, default=100)
    a("--heldout", type=int, default=None, help=f"held-out inputs drawn per seed (default {HELDOUT})")
    a("--heldout-file", default=None,
      help="pairs: held-out input<TAB>output lines, their inputs left out of training (in place of --heldout)")
    a("--target", type=float, default=1.0, help="held-out exact match that stops training; 0 = never")
    a("--target-patience", type=int, default=1, help="consecutive evaluations the target must hold")
    a("--seed", type=int, default=0)
    a("--threads", type=int, default=1)
    a("--verbose", action="store_true", help="a line per evaluation on stderr")
    return p


def heldout_count(cfg):
    return HELDOUT if cfg.heldout is None else cfg.heldout


def check(cfg):
    """The first bad option as one line, or None."""
    positive = ["vocab", "min_len", "max_len", "digits", "d_model", "heads", "layers", "d_ff", "batch_size", "steps",
                "eval_every", "target_patience", "threads"]
    for name in positive:
        if getattr(cfg, name) < 1:
            return f"--{name.replace('_', '-')} must be >= 1, got {getattr(cfg, name)}"
    if cfg.min_len > cfg.max_len:
        return f"--min-len {cfg.min_len} is greater than --max-len {cfg.max_len}"
    if cfg.d_model % cfg.heads:
        return f"--heads {cfg.heads} does not divide --d-model {cfg.d_model}"
    if not 0 <= cfg.target <= 1:
        return f"--target must lie in [0, 1], got {cfg.target}"
    if cfg.schedule != "constant" and cfg.steps <= cfg.warmup:
        return f"--schedule {cfg.schedule} needs --steps > --warmup, got {cfg.steps} and {cfg.warmup}"
    if heldout_count(cfg) < 0 or cfg.warmup < 0 or cfg.clip < 0 or cfg.positions < 0:
        return "--heldout, --warmup, --clip and --positions must be >= 0"
    if cfg.task == "pairs" and not cfg.file:
        return "--task pairs needs --file"
    if cfg.file and not os.path.isfile(cfg.file):
        return f"--file {cfg.file}: no such file"
    if cfg.task != "pairs" and cfg.file:
        return f"--file applies to --task pairs, not {cfg.task}"
    if cfg.heldout_file and cfg.task != "pairs":
        return f"--heldout-file applies to --task pairs, not {cfg.task}"
    if cfg.heldout_file and cfg.heldout is not None:
        return "--heldout does not apply with --heldout-file: the held-out pairs are that file's"
    if cfg.heldout_file and not os.path.isfile(cfg.heldout_file):
        return f"--heldout-file {cfg.heldout_file}: no such file"
    try:
        task = Task(cfg.task, cfg.vocab, cfg.min_len, cfg.max_len, cfg.digits, cfg.file, cfg.heldout_file)
    except ValueError as e:  # a malformed pairs file (UnicodeDecodeError is one too)
        return str(e)
    if task.heldout_pairs is not None:
        held = {tuple(s) for s, _ in task.heldout_pairs}
        if all(s in held for s in task.inputs):
            return (f"every input of --file {cfg.file} is also in --heldout-file {cfg.heldout_file}; "
                    "nothing is left to train on")
    elif heldout_count(cfg) >= task.input_space_size():
        return (f"--heldout {heldout_count(cfg)} takes all {task.input_space_size()} {cfg.task} inputs, "
                "leaving none to train on")
    needed = needed_positions(task, cfg)
    if positions_for(task, cfg) < needed:
        return f"--positions {cfg.positions} is shorter than the {needed} positions the task needs"
    return None


def main(argv=None):
    cfg = parser().parse_args(argv)
    problem = check(cfg)
    if problem:
        print(f"torch_gpt_reference: {problem}", file=sys.stderr)
        return 2
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if cfg.verbose else None
    print(json.dumps(train(cfg, log)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
