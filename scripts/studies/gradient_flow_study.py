#!/usr/bin/env python3
"""Gradient flow of Pre-LN and Post-LN transformers against Xiong et al. 2020 (docs/gradient_flow.md).

Two parts, each a set of `attnlab train` runs read back from their own files:

  init    the gradients of the first batch at initialisation (--steps 1 --probe-every 1 --clip 0,
          --init torch): per layer, the norm of the feed-forward output weight (ff.fc2.weight, the
          W^{2,l} of the paper's Figure 3) and of the attention projections (q, k, v, out); and the
          output side as depth grows: the last block's ff.fc2.weight and the head. Encoder and
          decoder, --norm pre and post, depths --depths, seeds --seeds; d 64, 4 heads, d_ff 256, reverse
          of 8 symbols from 10, batch 64. Medians over seeds go to gradient_flow_init.csv.
  warmup  training: the decoder with --warm-layers blocks on the same task, --norm pre and post, lr --lrs,
          without warm-up and with --warmup-steps of linear warm-up; steps to 100% held-out exact
          match (the first evaluation at 100%, every 100 steps, cap --cap), divergence (a non-finite
          loss ends the run) and the largest gradient norm of the first 100 steps. Rows go to
          gradient_flow_warmup.csv, replacing the rows of the same depth, norm, lr, warm-up and seed.

    /usr/bin/python3 scripts/studies/gradient_flow_study.py --jobs 2            # both parts, writes docs/
    /usr/bin/python3 scripts/studies/gradient_flow_study.py --plots-only        # the figures from the CSVs
    /usr/bin/python3 scripts/studies/gradient_flow_study.py --tiny --out /tmp/g # a seconds-long smoke run

Figures (matplotlib): figures/gradient_flow_layers.png (per-layer norms at the deepest depth),
figures/gradient_flow_depth.png (output-side norms against depth, log-log, with a 1/sqrt(L) line)
and figures/gradient_flow_warmup.png (steps to solve). Slopes are least-squares fits of log norm on
log L. One thread per run.
"""
import argparse
import csv
import math
import os
import sys

from attnlab_runs.schema import METRICS
from attnlab_runs.files import read_csv
from attnlab_runs.launch import ROOT, run_child, run_pool
from attnlab_runs.study import median

MODEL = ["--d-model", "64", "--heads", "4", "--d-ff", "256", "--init", "torch"]
TASK = ["--task", "reverse", "--vocab", "10", "--min-len", "8", "--max-len", "8", "--batch-size", "64"]
KINDS = ("ff.fc2.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.out_proj.weight")
INIT_FIELDS = ["arch", "norm", "layers", "layer", "param", "grad_norm", "seeds"]
WARM_FIELDS = ["layers", "norm", "lr", "warmup", "seed", "solved_at", "diverged", "final_exact", "max_grad_norm_first_100"]


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


def warm_job(args, norm, lr, warmup, seed):
    layers = args.warm_layers
    run = os.path.join(args.runs, f"warm-L{layers}-{norm}-lr{lr}-w{warmup}-s{seed}")
    flags = TASK + MODEL + ["--model", "decoder", "--norm", norm, "--layers", str(layers), "--lr", str(lr), "--warmup",
                            str(warmup), "--clip", "0", "--steps", str(args.cap), "--eval-every", "100",
                            "--target", "1", "--seed", str(seed), "--heldout", "200"]
    code = train(args.attnlab, flags, run, allow_fail=True)
    metrics = read_csv(os.path.join(run, METRICS))
    evals = [(int(r["step"]), float(r["heldout_exact"])) for r in metrics if r["heldout_exact"] != ""]
    norms = [float(r["grad_norm"]) for r in metrics if int(r["step"]) <= 100 and r["grad_norm"] != ""]
    solved = next((s for s, e in evals if e >= 1.0), "")
    diverged = code != 0 or any(not math.isfinite(float(r["loss"])) for r in metrics if r["loss"] != "")
    return {"layers": layers, "norm": norm, "lr": lr, "warmup": warmup, "seed": seed, "solved_at": solved,
            "diverged": int(diverged), "final_exact": evals[-1][1] if evals else 0.0,
            "max_grad_norm_first_100": f"{max(norms):.4g}" if norms else ""}


def run_warmup(args):
    jobs = [(n, lr, w, s) for n in ("pre", "post") for lr in args.lrs for w in (0, args.warmup_steps)
            for s in args.seeds]
    new = run_pool(lambda j: warm_job(args, *j), jobs, args.jobs, "gradient_flow_study")
    path = os.path.join(args.out, "gradient_flow_warmup.csv")
    key = lambda r: tuple(str(r[k]) for k in ("layers", "norm", "lr", "warmup", "seed"))  # noqa: E731
    done = {key(r) for r in new}
    old = [r for r in read_csv(path) if key(r) not in done] if os.path.exists(path) else []
    write_csv(path, WARM_FIELDS, old + new)


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
    if rows:
        for layers, norm, lr, w in warm_keys(rows):
            rs = [r for r in rows if (r["layers"], r["norm"], r["lr"], r["warmup"]) == (layers, norm, lr, w)]
            solved = [int(r["solved_at"]) if r["solved_at"] else math.inf for r in rs]
            m = median(solved)
            shown = [s if s != math.inf else '-' for s in solved]
            print(f"warm-up L {layers:>2} {norm:4} lr {lr:6} warmup {w:>4}: solved at {shown} "
                  f"(median {m if m != math.inf else '> cap'}), diverged {sum(int(r['diverged']) for r in rs)} "
                  f"of {len(rs)}, max grad norm in the first 100 steps {[r['max_grad_norm_first_100'] for r in rs]}")


def warm_keys(rows):
    """The (layers, norm, lr, warm-up) settings of the warm-up rows, in a fixed order."""
    keys = {(r["layers"], r["norm"], r["lr"], r["warmup"]) for r in rows}
    return sorted(keys, key=lambda k: (int(k[0]), k[1], float(k[2]), int(k[3])))


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
    rows = part_rows(out, "warmup")
    if rows:
        keys = warm_keys(rows)
        fig, ax = plt.subplots(figsize=(11, 4))
        cap = max(int(r["solved_at"]) for r in rows if r["solved_at"]) if any(r["solved_at"] for r in rows) else 1
        for i, key in enumerate(keys):
            rs = [r for r in rows if (r["layers"], r["norm"], r["lr"], r["warmup"]) == key]
            for r in rs:
                y = int(r["solved_at"]) if r["solved_at"] else cap * 1.15
                ax.plot(i, y, "x" if not r["solved_at"] else "o", color="tab:red" if key[1] == "post" else "tab:blue")
        ax.axhline(cap * 1.1, color="grey", lw=0.5)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([f"L {L}\n{n}-LN\nlr {lr}\nwarm-up {w}" for L, n, lr, w in keys], fontsize=6)
        ax.set_ylabel("steps to 100% held-out (x: not solved)")
        fig.tight_layout()
        fig.savefig(os.path.join(figs, "gradient_flow_warmup.png"), dpi=100)
        plt.close(fig)
    print(f"wrote the figures under {figs}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--parts", nargs="+", choices=["init", "warmup"], default=["init", "warmup"])
    p.add_argument("--depths", type=int, nargs="+", default=[2, 4, 6, 12, 24])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--lrs", type=float, nargs="+", default=[5e-4, 2e-3])
    p.add_argument("--warmup-steps", type=int, default=400)
    p.add_argument("--warm-layers", type=int, default=6, help="warmup part: decoder blocks")
    p.add_argument("--cap", type=int, default=3000, help="warmup part: step cap")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="depths 1 2, seed 0, one lr, cap 100: a smoke run")
    p.add_argument("--plots-only", action="store_true", help="the figures and slopes from the CSVs; run nothing")
    p.add_argument("--out", default=os.path.join(ROOT, "docs"))
    p.add_argument("--runs", default=os.path.join(ROOT, "runs", "gradient_flow"))
    args = p.parse_args()
    if args.tiny:
        args.depths, args.seeds, args.lrs, args.cap, args.warmup_steps = [1, 2], [0], [2e-3], 100, 20
    if min(args.depths) < 1 or args.jobs < 1 or args.cap < 100 or args.warmup_steps < 1:
        sys.exit("gradient_flow_study: --depths and --jobs must be >= 1, --cap >= 100, --warmup-steps >= 1")
    if not args.plots_only:
        if not os.access(args.attnlab, os.X_OK):
            sys.exit(f"gradient_flow_study: no attnlab binary at {args.attnlab}; build it or pass --attnlab")
        os.makedirs(args.runs, exist_ok=True)
        if "init" in args.parts:
            run_init(args)
        if "warmup" in args.parts:
            run_warmup(args)
    summarise(args.out)
    plot(args.out)


if __name__ == "__main__":
    main()
