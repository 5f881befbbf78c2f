#!/usr/bin/env python3
"""attnlab and the PyTorch reference from the same initial weights on the same batches: the adder study
(learning_speed_study.py's setting adder-mingpt, --init gpt2) replayed seed by seed.

For each seed: attnlab trains as the study runs it (with a metrics row every step), and the reference
(scripts/studies/torch_gpt_reference.py) starts from attnlab's initial weights and draws attnlab's own batches:
attnlab's training stream is reproduced here, std::mt19937_64 seeded with derive_seed(seed, 2)
(datasets/splits.cpp) drawing each example as the training pair at Rng::integer(0, n - 1)
(framework/random.cpp's rejection rule), the training pairs being --file's lines less the held-out
file's inputs, in file order (datasets/pairs.cpp). The two runs then differ only in float rounding.
Printed per seed, a JSON line on stdout (and at the end their summary on stderr): the largest loss
difference over the first 10, 20, 100, 200, 300, 500 and 1000 steps, the first step where it exceeds
0.01, and each run's steps to hold 100% and 99% (3 evaluations) and its first evaluation at 50%.
With --perturb E, the control: the reference run again
from the initial weights times (1 + E x N(0, 1)) elementwise, compared with the first reference run
the same way (how far a difference of rounding size carries on its own).

    /usr/bin/python3 scripts/studies/same_batches.py --attnlab build/attnlab --layout bare --seeds 0 1 2
    /usr/bin/python3 scripts/studies/same_batches.py --seeds 0 --steps 1000 --perturb 1e-6
    /usr/bin/python3 scripts/studies/same_batches.py --summarize OUT.jsonl     # the JSON lines of a run, summed up

Needs torch; exit 2 with one line for a bad option or a run whose vocabulary is not the reference's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import learning_speed_study as L  # noqa: E402
from attnlab_runs.schema import METRICS
from attnlab_runs.files import read_csv
from attnlab_runs.files import held_step
from attnlab_runs.study import median_range
import torch_gpt_reference as R  # noqa: E402

MASK = (1 << 64) - 1
TRAIN_STREAM = 2  # datasets/splits.h kTrainStream


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def derive_seed(base, stream):
    return splitmix64(splitmix64(base) ^ stream)


class MT19937_64:
    """std::mt19937_64: 312 words of state, outputs tempered 64-bit words."""

    def __init__(self, seed):
        self.mt = [seed & MASK]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK)
        self.index = 312

    def __call__(self):
        if self.index == 312:
            mt = self.mt
            for i in range(312):
                x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
                mt[i] = mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return y ^ (y >> 43)


def integer(engine, lo, hi):
    """Rng::integer: uniform in [lo, hi] by rejecting draws at or above the largest multiple of the span."""
    span = hi - lo + 1
    limit = (MASK // span) * span
    while True:
        x = engine()
        if x < limit:
            return lo + x % span


class AttnlabPairsStream:
    """attnlab's training stream of a pairs task with a held-out file, as (input ids, answer ids) pairs."""

    def __init__(self, task, file, heldout_file, seed):
        held = {a for _, a, _ in R.read_pairs(heldout_file)}
        ids = {c: R.FIRST_SYMBOL + i for i, c in enumerate(sorted({c for _, a, b in R.read_pairs(file) for c in a + b}))}
        self.train = [([ids[c] for c in a], [ids[c] for c in b]) for _, a, b in R.read_pairs(file) if a not in held]
        self.engine = MT19937_64(derive_seed(seed, TRAIN_STREAM))

    def next_batch(self, n):
        return [self.train[integer(self.engine, 0, len(self.train) - 1)] for _ in range(n)]


def attnlab_train(exe, flags, run):
    subprocess.run([exe, "train"] + flags + ["--tokenize", "chars", "--quiet", "--overwrite", "--run", run],
                   check=True, capture_output=True)
    return read_csv(os.path.join(run, METRICS))


def replay(torch, flags, init_weights, cfg_seed, steps, every, patience):
    """The reference from init_weights on attnlab's batches: ([loss per step], [[step, held-out exact]])."""
    cfg = R.parser().parse_args(flags)
    task = R.Task(cfg.task, cfg.vocab, cfg.min_len, cfg.max_len, cfg.digits, cfg.file, cfg.heldout_file)
    model = R.build_model(torch, cfg)(task.vocab_size, R.positions_for(task, cfg))
    model.load_state_dict(init_weights, strict=True)
    opt, params = R.make_optimizer(torch, model, cfg)
    stream = AttnlabPairsStream(task, cfg.file, cfg.heldout_file, cfg_seed)
    heldout = R.make_heldout(task, 0, cfg_seed)
    losses, evals = [], []
    for step in range(1, steps + 1):
        losses.append(R.train_step(torch, model, opt, params, cfg, stream.next_batch(cfg.batch_size), step).item())
        if step % every == 0 or step == steps:
            evals.append([step, R.greedy_exact(torch, model, heldout, cfg.layout)])
            if held_step(evals, 1.0, patience) is not None:
                break
    return losses, evals


def checkpoint(run):
    folder = os.path.join(run, "checkpoints")
    names = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors") and ".optim." not in f)
    return os.path.join(folder, names[-1])


def compared(ours, theirs, ours_evals, theirs_evals, patience):
    """How two runs' losses part, and each one's steps to 100% and 99% (held) and first at 50%."""
    diffs = [abs(a - b) for a, b in zip(ours, theirs)]

    def marks(evals):
        return [held_step(evals, 1.0, patience), held_step(evals, 0.99, patience), held_step(evals, 0.5, 1)]
    return {"max_loss_diff": {str(n): max(diffs[:n]) for n in (10, 20, 100, 200, 300, 500, 1000) if len(diffs) >= n},
            "first_step_loss_diff_over_0.01": next((i + 1 for i, d in enumerate(diffs) if d > 0.01), None),
            "100_99_50": [marks(ours_evals), marks(theirs_evals)]}


def one_seed(torch, exe, layout, seed, cap, perturb, work):
    setting = next(s for s in L.SETTINGS if s[0] == "adder-mingpt")
    _, _, default_cap, every, _ = setting
    patience = 3
    task_flags = [os.path.join(L.ROOT, f) if f in (L.ADDER, L.ADDER_HELDOUT) else f  # from any directory
                  for f in L.task_flags_for(setting, "pytorch")]
    flags = L.run_flags(task_flags, cap or default_cap, "gpt2", layout, seed, every, patience)
    start = os.path.join(work, f"init-{seed}")
    no_step = list(flags)  # the same run for one step at lr 1e-30: its checkpoint is the initialisation
    no_step[no_step.index("--lr") + 1] = "1e-30"
    no_step[no_step.index("--steps") + 1] = "1"
    no_step[no_step.index("--eval-every") + 1] = "1"
    attnlab_train(exe, no_step, start)
    with open(os.path.join(start, "vocab.txt")) as f:
        tokens = [line.rstrip("\n") for line in f if not line.startswith("#")][4:]
    task = R.Task("pairs", 0, 0, 0, 0, flags[flags.index("--file") + 1])
    if tokens != sorted(tokens) or len(tokens) + R.FIRST_SYMBOL != task.vocab_size:
        print(f"same_batches: attnlab's vocabulary {tokens} is not the reference's sorted characters", file=sys.stderr)
        raise SystemExit(2)
    rows = attnlab_train(exe, flags + ["--log-every", "1"], os.path.join(work, f"full-{seed}"))
    ours = [float(r["loss"]) for r in rows]
    ours_evals = [[int(r["step"]), float(r["heldout_exact"])] for r in rows if r["heldout_exact"] != ""]
    weights = R.read_safetensors(torch, checkpoint(start))
    theirs, theirs_evals = replay(torch, flags, weights, seed, cap or default_cap, every, patience)
    out = {"seed": seed, "layout": layout, "loss_step1": [ours[0], theirs[0]],
           "attnlab_vs_reference": compared(ours, theirs, ours_evals, theirs_evals, patience)}
    if perturb > 0:
        noise = torch.Generator().manual_seed(seed)
        moved = {k: v * (1 + perturb * torch.randn(v.shape, generator=noise)) for k, v in weights.items()}
        again, again_evals = replay(torch, flags, moved, seed, cap or default_cap, every, patience)
        out["reference_vs_perturbed"] = compared(theirs, again, theirs_evals, again_evals, patience)
    return out


def summary(results, cap):
    """Lines: each run's median (range) of steps to 100%, 99% and first at 50% over the seeds, the seeds on
    which the second run got to 100% first, and the median step where the losses parted by 0.01."""
    out = []
    for pair, names in (("attnlab_vs_reference", ("attnlab", "the reference on attnlab's batches")),
                        ("reference_vs_perturbed", ("the reference", "the reference from perturbed weights"))):
        rs = [r[pair] for r in results if pair in r]
        if not rs:
            continue
        seeds = [r["seed"] for r in results if pair in r]
        for side, name in enumerate(names):
            marks = [median_range([x["100_99_50"][side][k] for x in rs], cap) for k in range(3)]
            out.append(f"{name}, seeds {seeds}: 100% {marks[0]}, 99% {marks[1]}, first at 50% {marks[2]}")
        inf = cap + 1
        first = [(x["100_99_50"][0][0] or inf, x["100_99_50"][1][0] or inf) for x in rs]
        parted = [x["first_step_loss_diff_over_0.01"] for x in rs]
        out.append(f"{names[1]} held 100% first on {sum(b < a for a, b in first)} of {len(rs)} seeds, later on "
                   f"{sum(b > a for a, b in first)}; losses parted by 0.01 at step {median_range(parted, cap)}")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(L.ROOT, "build", "attnlab"))
    p.add_argument("--layout", choices=["special", "bare"], default="bare")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=0, help="step cap; 0 = the study's (10000)")
    p.add_argument("--summarize", metavar="JSONL", help="sum up the JSON lines of an earlier run; run nothing")
    p.add_argument("--perturb", type=float, default=0.0, help="relative noise on the control's initial weights; 0 = no control")
    args = p.parse_args()
    if args.summarize:
        with open(args.summarize) as f:
            print("\n".join(summary([json.loads(line) for line in f if line.strip()], args.steps or 10000)))
        return 0
    if args.steps < 0 or args.perturb < 0 or not os.access(args.attnlab, os.X_OK):
        print(f"same_batches: --steps and --perturb must be >= 0 and --attnlab executable, got {args.steps}, "
              f"{args.perturb} and {args.attnlab}", file=sys.stderr)
        return 2
    import torch
    torch.set_num_threads(1)
    results = []
    with tempfile.TemporaryDirectory() as work:
        for seed in args.seeds:
            results.append(one_seed(torch, args.attnlab, args.layout, seed, args.steps, args.perturb, work))
            print(json.dumps(results[-1]), flush=True)
    print("\n".join(summary(results, args.steps or 10000)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
