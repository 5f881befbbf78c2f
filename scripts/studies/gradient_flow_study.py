#!/usr/bin/env python3
"""Gradient flow of Pre-LN and Post-LN transformers against Xiong et al. 2020 (docs/gradient_flow.md).

Three parts, each a set of `attnlab train` runs read back from their own files:

  init    the gradients of the first batch at initialisation (--steps 1 --probe-every 1 --clip 0,
          --init torch): per layer, the norm of the feed-forward output weight (ff.fc2.weight, the
          W^{2,l} of the paper's Figure 3) and of the attention projections (q, k, v, out); and the
          output side as depth grows: the last block's ff.fc2.weight and the head. Encoder and
          decoder, --norm pre and post, depths --depths, seeds --seeds; d 64, 4 heads, d_ff 256, reverse
          of 8 symbols from 10, batch 64. Medians over seeds go to gradient_flow_init.csv.
  warmup     training (scripts/studies/gradient_flow_warmup.py): the decoder with each of --warm-layers
             blocks on the same task, --norm pre and post, lr --lrs, without warm-up and with
             --warmup-steps of linear warm-up; steps to 100% held-out exact match (every 100 steps, cap
             --cap), divergence, the loss at the end and the largest per-step gradient norm of the first
             100 steps. Rows go to gradient_flow_warmup.csv, replacing those of the same setting and seed.
  sharpness  (not in the default --parts) the same settings for --probe-steps steps with the sharpness
             probe every --probe-interval steps: lambda_max * lr at the first steps, gradient_flow_sharpness.csv.

    /usr/bin/python3 scripts/studies/gradient_flow_study.py --jobs 2            # both parts, writes docs/
    /usr/bin/python3 scripts/studies/gradient_flow_study.py --plots-only        # figures and tables from the CSVs
    /usr/bin/python3 scripts/studies/gradient_flow_study.py --tiny --out /tmp/g # a seconds-long smoke run

Figures (matplotlib): figures/gradient_flow_layers.png (per-layer norms at the deepest depth),
figures/gradient_flow_depth.png (output-side norms against depth, log-log, with a 1/sqrt(L) line),
figures/gradient_flow_warmup.png (steps to solve) and figures/gradient_flow_sharpness.png (lambda_max * lr);
the tables between the page's gradient_flow_warmup and gradient_flow_sharpness markers. Slopes are
least-squares fits of log norm on log L. One thread per run.
"""
import argparse
import csv
import math
import os
import sys

from attnlab_runs.files import read_csv
from attnlab_runs.launch import ROOT, run_child, run_pool
from attnlab_runs.study import median
import gradient_flow_warmup as W

MODEL = ["--d-model", "64", "--heads", "4", "--d-ff", "256", "--init", "torch"]
TASK = ["--task", "reverse", "--vocab", "10", "--min-len", "8", "--max-len", "8", "--batch-size", "64"]
KINDS = ("ff.fc2.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.out_proj.weight")
INIT_FIELDS = ["arch", "norm", "layers", "layer", "param", "grad_norm", "seeds"]


def train(exe, flags, run_dir, allow_fail=False):
    cmd = [exe, "train"] + flags + ["--threads", "1", "--quiet", "--overwrite", "--run", run_dir]
    code, _, err, _ = run_child(cmd)
    if code != 0 and not allow_fail:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}): {err.strip()}")
    return code


def init_job(args, arch, norm, layers, seed):
    run = os.path.join(args.runs, f"init-{arch}-{norm}-L{layers}-s{seed}")
    flags = TASK + MODEL + ["--model", arch, "--norm", norm, "--layers", str(layers), "--seed", str(seed),
                            "--steps", "1", "--probe-every", "1", "--eval-every", "1", "--heldout", "20", "--clip", "0"]
    train(args.attnlab, flags, run)
    return [(arch, norm, layers, seed, r["param"], float(r["grad_norm"]))
            for r in read_csv(os.path.join(run, "probe_params.csv")) if r["step"] == "1"]


def layer_of(param):
    """(block index or -1, the parameter's name within its block) of blocks.I.NAME; (-1, name) otherwise."""
    parts = param.split(".")
    if parts[0] == "blocks":
        return int(parts[1]), ".".join(parts[2:])
    return -1, param


def run_init(args):
    jobs = [(a, n, L, s) for a in ("encoder", "decoder") for n in ("pre", "post") for L in args.depths
            for s in args.seeds]
    raw = [row for rows in run_pool(lambda j: init_job(args, *j), jobs, args.jobs, "gradient_flow_study")
           for row in rows]
    groups = {}
    for arch, norm, layers, _, param, g in raw:
        layer, name = layer_of(param)
        if name in KINDS or param == "head.weight":
            groups.setdefault((arch, norm, layers, layer, name), []).append(g)
    rows = [{"arch": a, "norm": n, "layers": L, "layer": l, "param": p, "grad_norm": f"{median(v):.6g}",
             "seeds": len(v)} for (a, n, L, l, p), v in sorted(groups.items())]
    write_csv(os.path.join(args.out, "gradient_flow_init.csv"), INIT_FIELDS, rows)


def write_csv(path, fields, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(path + ".tmp", path)
    print(f"wrote {path} ({len(rows)} rows)")


def slope(points):
    """Least-squares slope of log y on log x."""
    xs, ys = [math.log(x) for x, _ in points], [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def output_side(rows, arch, norm):
    """{'last ff.fc2': [(L, norm)], 'head': [(L, norm)]} from the init rows."""
    out = {"last ff.fc2": [], "head": []}
    for r in rows:
        if r["arch"] != arch or r["norm"] != norm:
            continue
        L, layer = int(r["layers"]), int(r["layer"])
        if r["param"] == "ff.fc2.weight" and layer == L - 1:
            out["last ff.fc2"].append((L, float(r["grad_norm"])))
        if r["param"] == "head.weight":
            out["head"].append((L, float(r["grad_norm"])))
    return {k: sorted(v) for k, v in out.items()}


def part_rows(out, part):
    """The rows of gradient_flow_PART.csv in `out`, [] before that part has run."""
    return read_csv(os.path.join(out, f"gradient_flow_{part}.csv"), missing_ok=True)


def summarise(out):
    """The slopes and per-layer ratios the doc quotes, printed from the CSVs."""
    rows = part_rows(out, "init")
    if rows:
        deepest = max(int(r["layers"]) for r in rows)
        for arch in ("encoder", "decoder"):
            for norm in ("pre", "post"):
                sides = output_side(rows, arch, norm)
                fc2 = [(int(r["layer"]), float(r["grad_norm"])) for r in rows if r["arch"] == arch and
                       r["norm"] == norm and int(r["layers"]) == deepest and r["param"] == "ff.fc2.weight"]
                fc2.sort()
                ratio = fc2[-1][1] / fc2[0][1] if fc2 else float("nan")
                print(f"{arch:7} {norm:4}: slope of log |grad| on log L: last ff.fc2 {slope(sides['last ff.fc2']):+.2f}, "
                      f"head {slope(sides['head']):+.2f}; L = {deepest}: ff.fc2 last/first block {ratio:.2f}")
    rows = part_rows(out, "warmup")
    for layers, norm, lr, w in W.setting_keys(rows):
        rs = W.of(rows, (layers, norm, lr, w))
        solved = [int(r["solved_at"]) if r["solved_at"] else math.inf for r in rs]
        m = median(solved)
        shown = [s if s != math.inf else '-' for s in solved]
        print(f"warm-up L {layers:>2} {norm:4} lr {lr:6} warmup {w:>4}: solved at {shown} "
              f"(median {m if m != math.inf else '> cap'}), diverged {sum(int(r['diverged']) for r in rs)} "
              f"of {len(rs)}, max per-step grad norm in the first 100 steps {[r['max_grad_norm_first_100'] for r in rs]}")


def plot(out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figs = os.path.join(out, "figures")
    os.makedirs(figs, exist_ok=True)
    rows = part_rows(out, "init")
    if rows:
        deepest = max(int(r["layers"]) for r in rows)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
        for ax, arch in zip(axes, ("encoder", "decoder")):
            for norm, colour in (("pre", "tab:blue"), ("post", "tab:red")):
                for kind, style in (("ff.fc2.weight", "-o"), ("attn.q_proj.weight", "--s"), ("attn.v_proj.weight", ":^")):
                    pts = sorted((int(r["layer"]), float(r["grad_norm"])) for r in rows if r["arch"] == arch and
                                 r["norm"] == norm and int(r["layers"]) == deepest and r["param"] == kind)
                    ax.plot([p[0] + 1 for p in pts], [p[1] for p in pts], style, color=colour, ms=3,
                            label=f"{norm}-LN {kind.replace('.weight', '')}")
            ax.set_yscale("log")
            ax.set_xlabel("block")
            ax.set_title(f"{arch}, L = {deepest}: |grad| at initialisation")
        axes[0].set_ylabel("gradient norm (median over seeds)")
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(figs, "gradient_flow_layers.png"), dpi=100)
        plt.close(fig)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, arch in zip(axes, ("encoder", "decoder")):
            for norm, colour in (("pre", "tab:blue"), ("post", "tab:red")):
                for kind, style in (("last ff.fc2", "-o"), ("head", "--s")):
                    pts = output_side(rows, arch, norm)[kind]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=colour, ms=3,
                            label=f"{norm}-LN {kind} (slope {slope(pts):+.2f})")
            pre = output_side(rows, arch, "pre")["last ff.fc2"]
            if pre:
                L0, g0 = pre[0]
                ax.plot([p[0] for p in pre], [g0 * math.sqrt(L0 / p[0]) for p in pre], "k:", label="1/sqrt(L)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("blocks L")
            ax.set_title(f"{arch}: output-side |grad| against depth")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(figs, "gradient_flow_depth.png"), dpi=100)
        plt.close(fig)
    W.plot(plt, out, figs)
    print(f"wrote the figures under {figs}")


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--parts", nargs="+", choices=["init", "warmup", "sharpness"], default=["init", "warmup"])
    p.add_argument("--depths", type=int, nargs="+", default=[2, 4, 6, 12, 24])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--lrs", type=float, nargs="+", default=[5e-4, 2e-3])
    p.add_argument("--warmup-steps", type=int, default=400)
    p.add_argument("--warm-layers", type=int, nargs="+", default=[6], help="warmup, sharpness parts: decoder blocks")
    p.add_argument("--cap", type=int, default=3000, help="warmup part: step cap")
    p.add_argument("--probe-seeds", type=int, nargs="+", default=[0], help="sharpness part: seeds")
    p.add_argument("--probe-steps", type=int, default=20, help="sharpness part: steps of each run")
    p.add_argument("--probe-interval", type=int, default=2, help="sharpness part: --probe-sharpness N")
    p.add_argument("--probe-warmups", type=int, nargs="+", default=[0, 400], help="sharpness part: --warmup of the runs")
    p.add_argument("--sharpness-tol", type=float, default=1e-2, help="sharpness part: Lanczos relative tolerance")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="depths 1 2, seed 0, one lr, 2 blocks, cap 100: a smoke run")
    p.add_argument("--plots-only", "--figures-only", action="store_true",
                   help="the figures, tables and slopes from the CSVs; run nothing")
    p.add_argument("--out", "--docs", default=os.path.join(ROOT, "docs"), help="the CSVs, figures/ and the page")
    p.add_argument("--runs", default=os.path.join(ROOT, "runs", "gradient_flow"))
    args = p.parse_args()
    if args.tiny:
        args.depths, args.seeds, args.lrs, args.cap, args.warmup_steps = [1, 2], [0], [2e-3], 100, 20
        args.warm_layers, args.probe_steps, args.probe_warmups = [2], 4, [0, 20]
        args.parts = sorted(set(args.parts) | {"sharpness"})
    if min(args.depths + args.warm_layers) < 1 or args.jobs < 1 or args.cap < 100 or args.warmup_steps < 1 \
            or args.probe_steps < 1 or args.probe_interval < 1:
        sys.exit("gradient_flow_study: --depths, --warm-layers, --jobs, --probe-steps and --probe-interval must be "
                 ">= 1, --cap >= 100, --warmup-steps >= 1")
    return args


def main():
    args = parse()
    if not args.plots_only:
        if not os.access(args.attnlab, os.X_OK):
            sys.exit(f"gradient_flow_study: no attnlab binary at {args.attnlab}; build it or pass --attnlab")
        os.makedirs(args.runs, exist_ok=True)
        if "init" in args.parts:
            run_init(args)
        if "warmup" in args.parts:
            W.run_warmup(args, TASK + MODEL)
        if "sharpness" in args.parts:
            W.run_sharpness(args, TASK + MODEL)
    summarise(args.out)
    plot(args.out)
    W.write_tables(args.out)


if __name__ == "__main__":
    main()
