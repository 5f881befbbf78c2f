#!/usr/bin/python3
"""The 1/sqrt(d_k) scaling study: why attention logits are divided by sqrt(d_k).

usage: scripts/studies/scaling_study.py [--attnlab PATH] [--jobs N] [--work DIR] [--quick]

(a) Logit variance at initialization vs d_k in {4, ..., 128} for the scales
    none (1), sqrt (1/sqrt(d_k)) and linear (1/d_k), with q and k entries drawn
    i.i.d. N(0, 1) directly (numpy): expectation d_k, 1, 1/d_k.
(b) The same grid through the CLI, on a real model at initialization: one
    training step of a 2-layer encoder with one head of width d_k
    (--d-k, d_model = 64 fixed) and --probe-every 1; read from probe_*.csv:
    logit variance, attention entropy, saturation (rows with max weight >
    0.99), and the gradient norm reaching W_Q and W_K. Two variants:
      "as built"   --init torch (torch's Linear init: q, k entries have
                   variance ~1/3 on LayerNorm'd inputs, so q.k has ~d_k/9);
      "unit q, k"  the logit scale multiplied by 3, which is the same forward
                   pass as scaling W_Q and W_K by sqrt(3) so that q and k
                   entries have unit variance, as the textbook argument assumes.
(c) Steps to solve reverse (held-out exact match 1.0) for each scale at a few
    d_k, small models, capped; unsolved runs are drawn at the cap.
Figures go to docs/figures/scaling_*.png and every number to
docs/figures/scaling_study.csv. Takes a few minutes on one core (--quick: less).
"""
import argparse
import csv
import math
import os
import subprocess
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from attnlab_runs.files import read_csv, read_summary
from attnlab_runs.launch import ROOT, default_exe

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


FIG = os.path.join(ROOT, "docs", "figures")
D_KS = [4, 8, 16, 32, 64, 128]
SCALES = ["none", "sqrt", "linear"]
LABEL = {"none": "no scale", "sqrt": r"$1/\sqrt{d_k}$", "linear": r"$1/d_k$"}
COLOR = {"none": "tab:red", "sqrt": "tab:blue", "linear": "tab:green"}


def scale_value(scale, d_k):
    return {"none": 1.0, "sqrt": 1.0 / math.sqrt(d_k), "linear": 1.0 / d_k}[scale]


# ---- (a) synthetic unit-variance q, k ----------------------------------------

def synthetic(rows_out, queries=512, keys=16, seed=0):
    rng = np.random.default_rng(seed)
    res = {}
    for d_k in D_KS:
        q = rng.standard_normal((queries, d_k))
        k = rng.standard_normal((keys, d_k))
        dots = q @ k.T
        for scale in SCALES:
            logits = dots * scale_value(scale, d_k)
            w = np.exp(logits - logits.max(axis=1, keepdims=True))
            w /= w.sum(axis=1, keepdims=True)
            with np.errstate(divide="ignore", invalid="ignore"):
                ent = -np.where(w > 0, w * np.log(w), 0).sum(axis=1).mean()
            sat = (w.max(axis=1) > 0.99).mean()
            res[(d_k, scale)] = dict(logit_var=logits.var(), entropy=ent, saturated=sat)
            for m, v in res[(d_k, scale)].items():
                rows_out.append(["a_synthetic", d_k, scale, "unit q,k (numpy)", m, v])
    return res


# ---- (b) the model at initialization, through the CLI ------------------------

def init_run(exe, work, d_k, scale, variant, seed):
    s = scale_value(scale, d_k) * (3.0 if variant == "unit" else 1.0)
    run = os.path.join(work, f"init-dk{d_k}-{scale}-{variant}-s{seed}")
    cmd = [exe, "train", "--task", "reverse", "--model", "encoder", "--vocab", "8", "--min-len", "16",
           "--max-len", "16", "--d-model", "64", "--heads", "1", "--d-k", str(d_k), "--layers", "2", "--d-ff", "128",
           "--attn-scale", repr(s), "--steps", "1", "--probe-every", "1", "--batch-size", "64", "--heldout", "8",
           "--target", "0", "--init", "torch", "--seed", str(seed), "--quiet", "--threads", "1", "--overwrite", "--run", run]
    subprocess.run(cmd, check=True)
    heads = [r for r in read_csv(os.path.join(run, "probe_heads.csv")) if r["step"] == "1"]
    params = [r for r in read_csv(os.path.join(run, "probe_params.csv")) if r["step"] == "1"]
    wq = math.sqrt(sum(float(r["grad_norm"]) ** 2 for r in params if r["param"].endswith("q_proj.weight")))
    wk = math.sqrt(sum(float(r["grad_norm"]) ** 2 for r in params if r["param"].endswith("k_proj.weight")))
    mean = lambda key: float(np.mean([float(r[key]) for r in heads]))  # noqa: E731
    return dict(logit_var=mean("logit_var"), entropy=mean("entropy"), saturated=mean("saturated"), grad_wq=wq,
                grad_wk=wk)


# ---- (c) steps to solve -------------------------------------------------------

def solve_run(exe, work, d_k, scale, seed, cap):
    run = os.path.join(work, f"solve-dk{d_k}-{scale}-s{seed}")
    cmd = [exe, "train", "--task", "reverse", "--model", "encoder", "--vocab", "16", "--min-len", "16", "--max-len", "16",
           "--d-model", "32", "--heads", "1", "--d-k", str(d_k), "--layers", "2", "--d-ff", "64",
           "--attn-scale", scale, "--lr", "3e-3", "--batch-size", "32", "--steps", str(cap), "--eval-every", "25",
           "--heldout", "200", "--target", "1", "--init", "torch", "--seed", str(seed), "--quiet", "--threads", "1",
           "--overwrite", "--run", run]
    subprocess.run(cmd, check=True)
    s = read_summary(run)
    return s["solved_at_step"], s["heldout_exact"], s["seconds"]


def dk_axis(a):
    """An axis over d_k: log base 2, with a grid."""
    a.set_xscale("log", base=2)
    a.set_xlabel("$d_k$")
    a.grid(alpha=0.3, which="both")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attnlab", default=default_exe())
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work", default="/tmp/attnlab-scaling-study", help="directory for the runs")
    ap.add_argument("--seeds", type=int, default=3, help="seeds averaged in (b)")
    ap.add_argument("--solve-seeds", type=int, default=3, help="seeds per point in (c)")
    ap.add_argument("--cap", type=int, default=3000, help="most training steps in (c)")
    ap.add_argument("--solve-dks", default="8,32,128")
    ap.add_argument("--quick", action="store_true", help="1 seed each, cap 600 (a smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.solve_seeds, args.cap = 1, 1, 600
    os.makedirs(FIG, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    rows = []

    syn = synthetic(rows)

    jobs = [(d, s, v, seed) for d in D_KS for s in SCALES for v in ["built", "unit"] for seed in range(args.seeds)]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda j: init_run(args.attnlab, args.work, *j), jobs))
    init = defaultdict(lambda: defaultdict(list))
    for (d, s, v, seed), r in zip(jobs, results):
        for m, val in r.items():
            init[(d, s, v)][m].append(val)
    for (d, s, v), ms in init.items():
        for m, vals in ms.items():
            rows.append(["b_init_model", d, s, "as built" if v == "built" else "unit q,k", m, float(np.mean(vals))])

    solve_dks = [int(x) for x in args.solve_dks.split(",")]
    sjobs = [(d, s, seed) for d in solve_dks for s in SCALES for seed in range(args.solve_seeds)]
    with ThreadPoolExecutor(args.jobs) as pool:
        sres = list(pool.map(lambda j: solve_run(args.attnlab, args.work, *j, args.cap), sjobs))
    solved = defaultdict(list)
    for (d, s, seed), (at, exact, secs) in zip(sjobs, sres):
        solved[(d, s)].append(at)
        rows.append(["c_solve", d, s, f"seed {seed}", "solved_at_step", at])
        rows.append(["c_solve", d, s, f"seed {seed}", "heldout_exact", exact])
        rows.append(["c_solve", d, s, f"seed {seed}", "seconds", secs])

    with open(os.path.join(FIG, "scaling_study.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["part", "d_k", "scale", "variant", "metric", "value"])
        w.writerows(rows)

    mean_init = lambda d, s, v, m: float(np.mean(init[(d, s, v)][m]))  # noqa: E731

    # Figure 1: logit variance.
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for s in SCALES:
        expect = [d * scale_value(s, d) ** 2 for d in D_KS]
        ax[0].plot(D_KS, expect, color=COLOR[s], lw=6, alpha=0.2)
        ax[0].plot(D_KS, [syn[(d, s)]["logit_var"] for d in D_KS], "o-", color=COLOR[s], label=LABEL[s])
        ax[1].plot(D_KS, expect, color=COLOR[s], lw=6, alpha=0.2)
        ax[1].plot(D_KS, [mean_init(d, s, "unit", "logit_var") for d in D_KS], "o-", color=COLOR[s],
                   label=LABEL[s] + ", unit q,k")
        ax[1].plot(D_KS, [mean_init(d, s, "built", "logit_var") for d in D_KS], "s--", color=COLOR[s],
                   label=LABEL[s] + ", as built", alpha=0.7)
    ax[0].set_title("(a) q, k entries i.i.d. N(0,1) (numpy)")
    ax[1].set_title("(b) attnlab encoder at init (probe, mean of 2 layers)")
    for a in ax:
        dk_axis(a)
        a.set_yscale("log")
        a.legend(fontsize=7)
    ax[0].set_ylabel("variance of the scaled logits")
    fig.suptitle("Logit variance at initialization (thick pale lines: $d_k \\cdot s^2$, the unit-variance expectation)")
    fig.tight_layout()
    fig.savefig(os.path.join(FIG, "scaling_logit_variance.png"), dpi=110)

    # Figure 2: entropy, saturation, gradient into W_Q, W_K at init.
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for s in SCALES:
        for v, style in [("unit", "o-"), ("built", "s--")]:
            lab = LABEL[s] + (", unit q,k" if v == "unit" else ", as built")
            alpha = 1 if v == "unit" else 0.6
            ax[0].plot(D_KS, [mean_init(d, s, v, "entropy") for d in D_KS], style, color=COLOR[s], label=lab, alpha=alpha)
            ax[1].plot(D_KS, [mean_init(d, s, v, "saturated") for d in D_KS], style, color=COLOR[s], alpha=alpha)
            g = [math.hypot(mean_init(d, s, v, "grad_wq"), mean_init(d, s, v, "grad_wk")) for d in D_KS]
            ax[2].plot(D_KS, g, style, color=COLOR[s], alpha=alpha)
    ax[0].axhline(math.log(16), color="gray", lw=1, ls=":")
    ax[0].text(4, math.log(16) * 0.97, "log 16 (uniform)", fontsize=7, va="top")
    ax[0].set_title("mean attention entropy (nats), T = 16")
    ax[1].set_title("fraction of rows with max weight > 0.99")
    ax[2].set_title(r"gradient norm into $W_Q, W_K$ ($\sqrt{\|g_Q\|^2+\|g_K\|^2}$)")
    ax[2].set_yscale("log")
    for a in ax:
        dk_axis(a)
    ax[0].legend(fontsize=7)
    fig.suptitle("At initialization: 2-layer encoder, one head of width $d_k$, d = 64 (mean of %d seeds)" % args.seeds)
    fig.tight_layout()
    fig.savefig(os.path.join(FIG, "scaling_init_attention.png"), dpi=110)

    # Figure 3: steps to solve.
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    width = 0.27
    for i, s in enumerate(SCALES):
        for j, d in enumerate(solve_dks):
            ats = solved[(d, s)]
            vals = [a if a > 0 else args.cap for a in ats]
            x = j + (i - 1) * width
            ax.bar(x, np.mean(vals), width, color=COLOR[s], alpha=0.75, label=LABEL[s] if j == 0 else None)
            ax.plot([x] * len(vals), vals, "k.", ms=5)
            if any(a <= 0 for a in ats):
                ax.text(x, args.cap, "unsolved" if all(a <= 0 for a in ats) else f"{sum(a <= 0 for a in ats)} unsolved",
                        ha="center", va="bottom", fontsize=6, rotation=90)
    if any(a <= 0 for ats in solved.values() for a in ats):
        ax.axhline(args.cap, color="gray", ls=":", lw=1)
    ax.set_xticks(range(len(solve_dks)))
    ax.set_xticklabels([f"$d_k$ = {d}" for d in solve_dks])
    ax.set_ylabel("steps to held-out exact match 1.0")
    ax.set_title("reverse (len 16, 16 symbols), 2-layer encoder, 1 head, d = 32, AdamW 3e-3\n(bars: mean, dots: seeds, cap %d)"
                 % args.cap, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(FIG, "scaling_steps_to_solve.png"), dpi=110)

    # The numbers, for the write-up.
    print("(a) synthetic logit variance / (b) model at init: logit var, entropy, saturated, |grad W_Q,W_K|")
    for d in D_KS:
        for s in SCALES:
            print(f"d_k {d:4d} {s:6s}  (a) var {syn[(d, s)]['logit_var']:9.4g} ent {syn[(d, s)]['entropy']:5.3f} "
                  f"sat {syn[(d, s)]['saturated']:5.3f} | ", end="")
            for v in ["unit", "built"]:
                g = math.hypot(mean_init(d, s, v, "grad_wq"), mean_init(d, s, v, "grad_wk"))
                print(f"{v}: var {mean_init(d, s, v, 'logit_var'):9.4g} ent {mean_init(d, s, v, 'entropy'):5.3f} "
                      f"sat {mean_init(d, s, v, 'saturated'):5.3f} g {g:8.3g}  ", end="")
            print()
    print("(c) solved at step (per seed; -1 = not within the cap)")
    for d in solve_dks:
        print(f"d_k {d:4d}  " + "  ".join(f"{s}: {solved[(d, s)]}" for s in SCALES))
    print(os.path.join(FIG, "scaling_study.csv"))


if __name__ == "__main__":
    main()
