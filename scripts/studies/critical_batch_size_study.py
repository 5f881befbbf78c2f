#!/usr/bin/env python3
"""The critical batch size against the gradient noise scale (McCandlish et al. 2018), docs/studies/critical_batch_size.md.

One task (sort, 8 symbols from 10, encoder of d 32, 2 heads, 2 blocks, d_ff 64; Adam without weight decay,
no clipping, a constant learning rate), trained at batch sizes 8 to 1,024 (powers of two), each at every
learning rate of a grid, seeds 0 1 2, with `--grad-accum 2 --noise-scale` (B_simple from the two halves of
every batch). A run has reached a target loss at the first step where the mean training loss of the last
ceil(256 / B) steps (at least 256 sequences) is at or below it. Per seed and batch the best learning rate
(fewest steps S) counts; the median over seeds of S and of E = B·S is fitted with the paper's
S = S_min·(1 + B_crit/B), E = E_min·(1 + B/B_crit), B_crit = E_min/S_min (the hyperbola
(S − S_min)(E − E_min) = S_min·E_min), least squares in log S; B_simple is read from the runs' metrics.csv at
the step each target was reached.

    /usr/bin/python3 scripts/studies/critical_batch_size_study.py --attnlab /work/bin46/attnlab  # runs, CSV, page
    /usr/bin/python3 scripts/studies/critical_batch_size_study.py --figures-only  # figure and tables from the CSV
    /usr/bin/python3 scripts/studies/critical_batch_size_study.py --tiny --runs /tmp/r --docs /tmp/d  # smoke run

Runs go under runs/critical_batch_size/; one row per run goes to docs/critical_batch_size.csv as soon as it
ends (a run whose row is there is not run again), with its date, CPU and CPU-seconds. Writes
docs/figures/critical_batch_size.png and the tables of docs/studies/critical_batch_size.md between its
`<!-- BEGIN name -->` / `<!-- END name -->` markers. One thread per run.
"""
import argparse
import datetime
import math
import os
import sys
import threading

from attnlab_runs.files import read_csv, write_table
from attnlab_runs.launch import ROOT, run_child, run_pool
from attnlab_runs.study import add_places, cpu_kind, median, provenance, read_rows, replace_block

WHO = "critical_batch_size_study"
TASK = ["--task", "sort", "--vocab", "10", "--min-len", "8", "--max-len", "8"]
MODEL = ["--d-model", "32", "--heads", "2", "--layers", "2", "--d-ff", "64"]
OPTIM = ["--optimizer", "adam", "--weight-decay", "0", "--clip", "0"]
BATCHES = [8, 16, 32, 64, 128, 256, 512, 1024]
LRS = [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2, 3.2e-2]
TARGETS = [0.3, 0.1, 0.03]    # training loss (cross-entropy per answer token, nats)
WINDOW = 256                  # sequences the reached-rule averages over, at least
KEY = ("batch", "lr", "seed")
BASE_FIELDS = ["batch", "lr", "seed", "steps_run", "final_loss", "exit", "cpu_seconds", "date", "cpu"]


def cap(batch):
    """The step cap of a run at `batch`: 4000 at B = 8, falling as 1/sqrt(B), at least 300."""
    return max(300, round(4000 * math.sqrt(8 / batch)))


def fields(targets):
    return BASE_FIELDS[:6] + [c for t in targets for c in (f"steps_to_{t:g}", f"bsimple_at_{t:g}")] + BASE_FIELDS[6:]


def targets_of(rows_or_header):
    """The targets a CSV's columns name (steps_to_T), in column order."""
    cols = rows_or_header[0].keys() if rows_or_header and isinstance(rows_or_header[0], dict) else rows_or_header
    return [float(c[len("steps_to_"):]) for c in cols if c.startswith("steps_to_")]


def reached(losses, batch, target):
    """The first step (1-based) where the mean of the last ceil(WINDOW / batch) losses is <= target, or None."""
    w = max(1, math.ceil(WINDOW / batch))
    total = 0.0
    for i, v in enumerate(losses):
        total += v
        if i >= w:
            total -= losses[i - w]
        if i >= w - 1 and total / w <= target:
            return i + 1
    return None


def run_dir(args, batch, lr, seed):
    return os.path.join(args.runs, f"B{batch}-lr{lr:g}-s{seed}")


def one_run(args, batch, lr, seed):
    """Train one run to its cap and read its row back from its own metrics.csv."""
    run = run_dir(args, batch, lr, seed)
    steps = args.cap_override or cap(batch)
    cmd = [args.attnlab, "train"] + TASK + MODEL + OPTIM + [
        "--batch-size", str(batch), "--grad-accum", "2", "--noise-scale", "--lr", f"{lr:g}", "--seed", str(seed),
        "--steps", str(steps), "--log-every", "1", "--eval-every", str(steps), "--heldout", "100", "--target", "0",
        "--threads", "1", "--quiet", "--overwrite", "--run", run]
    code, _, err, cpu = run_child(["nice"] + cmd)
    metrics = read_csv(os.path.join(run, "metrics.csv"), missing_ok=True)
    if code != 0 and not metrics:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}): {err.strip()}")
    return row_of(metrics, batch, lr, seed, code, cpu, args.targets)


def row_of(metrics, batch, lr, seed, code, cpu, targets):
    losses = [float(r["loss"]) for r in metrics]
    row = {"batch": batch, "lr": f"{lr:g}", "seed": seed, "steps_run": len(losses),
           "final_loss": f"{losses[-1]:.4g}" if losses else "", "exit": code, "cpu_seconds": f"{cpu:.2f}",
           "date": datetime.date.today().isoformat(), "cpu": cpu_kind()}
    for t in targets:
        s = reached([v if math.isfinite(v) else math.inf for v in losses], batch, t)
        row[f"steps_to_{t:g}"] = s or ""
        row[f"bsimple_at_{t:g}"] = f"{float(metrics[s - 1]['noise_scale']):.4g}" if s and metrics[s - 1]["noise_scale"] else ""
    return row


def measure(args):
    path = os.path.join(args.docs, "critical_batch_size.csv")
    rows = read_rows(path, WHO)
    if rows and targets_of(rows) != args.targets:
        sys.exit(f"{WHO}: {path} holds the targets {targets_of(rows)}, not {args.targets}; move it away first")
    done = {tuple(str(r[k]) for k in KEY) for r in rows}
    jobs = [(b, lr, s) for s in args.seeds for b in args.batches for lr in args.lrs
            if (str(b), f"{lr:g}", str(s)) not in done]

    lock = threading.Lock()  # --jobs N: one writer of the CSV at a time

    def job(j):
        row = one_run(args, *j)
        with lock:  # written after every run: an interrupted study keeps what it ran
            rows.append(row)
            rows.sort(key=lambda r: (int(r["seed"]), int(r["batch"]), float(r["lr"])))
            write_table(path, fields(args.targets), rows)
        print(f"B {j[0]:5} lr {j[1]:<7g} seed {j[2]}: steps to {args.targets[1]:g}: "
              f"{row[f'steps_to_{args.targets[1]:g}'] or '-'} ({row['cpu_seconds']} CPU-s)", flush=True)
        return row
    run_pool(job, jobs, args.jobs, WHO)
    return rows


def best_steps(rows, target):
    """{(seed, batch): (steps, lr, B_simple)} of the learning rate that reached `target` in the fewest steps."""
    best = {}
    for r in rows:
        s = r[f"steps_to_{target:g}"]
        if not s:
            continue
        key, cand = (int(r["seed"]), int(r["batch"])), (int(s), float(r["lr"]), r[f"bsimple_at_{target:g}"])
        if key not in best or cand[0] < best[key][0]:
            best[key] = cand
    return best


def per_batch(rows, target):
    """[(B, median S over seeds, [S per seed], [best lr per seed], [B_simple per seed])] for the batches every
    seed reached the target at."""
    best = best_steps(rows, target)
    seeds = sorted({int(r["seed"]) for r in rows})
    out = []
    for b in sorted({int(r["batch"]) for r in rows}):
        got = [best.get((s, b)) for s in seeds]
        if all(got):
            out.append((b, median([g[0] for g in got]), [g[0] for g in got], [g[1] for g in got],
                        [float(g[2]) for g in got if g[2]]))
    return out


def fit(points):
    """(S_min, B_crit, rms of log10 S residuals) of S = S_min (1 + B_crit / B) to [(B, S)], least squares in
    log S over a grid of B_crit 0.5% apart (S_min then in closed form); None with fewer than 3 points."""
    if len(points) < 3:
        return None
    best = None
    for i in range(-1500, 3501):
        bc = 10 ** (i / 500)
        res = [math.log10(s) - math.log10(1 + bc / b) for b, s in points]
        c = sum(res) / len(res)
        rms = math.sqrt(sum((r - c) ** 2 for r in res) / len(res))
        if best is None or rms < best[2]:
            best = (10 ** c, bc, rms)
    return best


def summary(rows, targets):
    """Per target: the fit to the medians over seeds, the per-seed fits' B_crit, and B_simple at the target."""
    out = []
    for t in targets:
        pts = per_batch(rows, t)
        f = fit([(b, m) for b, m, *_ in pts])
        seeds = sorted({int(r["seed"]) for r in rows})
        best = best_steps(rows, t)
        per_seed = [fit([(b, v[0]) for (s2, b), v in best.items() if s2 == s]) for s in seeds]
        bs = [v for p in pts for v in p[4]]
        out.append({"target": t, "points": pts, "fit": f, "seed_bcrit": [p[1] for p in per_seed if p],
                    "bsimple": bs})
    return out


def spread(values, fmt="{:.3g}"):
    """ "median (min–max)" of values, "-" for none."""
    if not values:
        return "-"
    m, lo, hi = (fmt.format(v) for v in (median(values), min(values), max(values)))
    return m if len(values) == 1 or lo == hi else f"{m} ({lo}–{hi})"


def runs_table(summ):
    lines = ["| target loss | B | S: steps (median, range over seeds) | E = B·S (median) | best lr per seed | "
             "B_simple at the target |", "|---|---|---|---|---|---|"]
    for s in summ:
        for b, m, steps, lrs, bs in s["points"]:
            lines.append(f"| {s['target']:g} | {b} | {spread(steps, '{:g}')} | {b * m:g} | "
                         f"{', '.join(f'{lr:g}' for lr in lrs)} | {spread(bs)} |")
    return "\n".join(lines)


def fit_table(summ):
    lines = ["| target loss | batches fitted | S_min | E_min | B_crit = E_min/S_min | B_crit, per-seed fits | "
             "rms log10 S residual | B_simple at the target, all batches | B_crit / B_simple |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in summ:
        f = s["fit"]
        if not f:
            lines.append(f"| {s['target']:g} | {len(s['points'])} | - | - | - | - | - | {spread(s['bsimple'])} | - |")
            continue
        ratio = f"{f[1] / median(s['bsimple']):.2g}" if s["bsimple"] else "-"
        edge = " (the grid's edge: no bend in range)" if not 1e-2 < f[1] < 1e6 else ""
        lines.append(f"| {s['target']:g} | {len(s['points'])} | {f[0]:.3g} | {f[0] * f[1]:.3g} | {f[1]:.3g}{edge} | "
                     f"{spread(s['seed_bcrit'])} | {f[2]:.3f} | {spread(s['bsimple'])} | {ratio} |")
    return "\n".join(lines)


def cost_text(rows):
    cpu = sum(float(r["cpu_seconds"]) for r in rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    return (f"{len(rows)} runs (seeds {', '.join(map(str, seeds))}), {cpu:.0f} CPU-seconds in all; "
            f"measured {provenance(rows)}.")


def write_tables(docs, summ, rows):
    page = os.path.join(docs, "studies", "critical_batch_size.md")
    os.makedirs(os.path.dirname(page), exist_ok=True)
    text = open(page).read() if os.path.exists(page) else ""
    text = replace_block(text, "runs", runs_table(summ))
    text = replace_block(text, "fit", fit_table(summ))
    text = replace_block(text, "cost", cost_text(rows) if rows else "no runs yet")
    with open(page, "w") as f:
        f.write(text)


def draw_fit(axes, s, colour):
    """The points of one target on the three panels, and its fitted curves."""
    pts, f = s["points"], s["fit"]
    bs = [p[0] for p in pts]
    ss = [p[1] for p in pts]
    label = f"loss {s['target']:g}"
    axes[0].plot([b * m for b, m in zip(bs, ss)], ss, "o", color=colour, ms=4, label=label)
    axes[1].plot(bs, ss, "o", color=colour, ms=4, label=label)
    axes[2].plot(bs, [b * m for b, m in zip(bs, ss)], "o", color=colour, ms=4, label=label)
    for b, m in zip(bs, ss):
        axes[0].annotate(str(b), (b * m, m), fontsize=6, color=colour, xytext=(3, 2), textcoords="offset points")
    if s["bsimple"]:
        axes[1].axvline(median(s["bsimple"]), color=colour, ls=":", lw=1)
        axes[2].axvline(median(s["bsimple"]), color=colour, ls=":", lw=1)
    if not f:
        return
    s_min, bc = f[0], f[1]
    grid = [2 ** (k / 4) for k in range(0, 4 * 14)]
    axes[0].plot([s_min * bc * (1 + b / bc) for b in grid], [s_min * (1 + bc / b) for b in grid], "-", color=colour,
                 lw=1, label=f"fit: B_crit {bc:.3g}")
    axes[0].axhline(s_min, color=colour, ls="--", lw=0.6)
    axes[0].axvline(s_min * bc, color=colour, ls="--", lw=0.6)
    axes[1].plot(grid, [s_min * (1 + bc / b) for b in grid], "-", color=colour, lw=1)
    axes[2].plot(grid, [s_min * bc * (1 + b / bc) for b in grid], "-", color=colour, lw=1)
    axes[1].axvline(bc, color=colour, ls="-", lw=0.6)
    axes[2].axvline(bc, color=colour, ls="-", lw=0.6)


def plot(docs, summ):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from attnlab_runs.figures import save_figure
    os.makedirs(os.path.join(docs, "figures"), exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    for s, colour in zip(summ, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")):
        draw_fit(axes, s, colour)
    titles = ("steps S against examples E (dashed: S_min, E_min)", "steps S against batch B",
              "examples E against batch B")
    xlabels = ("examples E = B·S (sequences)", "batch B (sequences)", "batch B (sequences)")
    for ax, title, xl, yl in zip(axes, titles, xlabels, ("steps S", "steps S", "examples E")):
        ax.set_xscale("log", base=2 if ax is not axes[0] else 10)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7, title="solid: B_crit, dotted: B_simple", title_fontsize=7)
    save_figure(fig, os.path.join(docs, "figures", "critical_batch_size.png"),
                title="Steps and examples to a training loss, best learning rate per batch (median over seeds)")
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--batches", type=int, nargs="+", default=BATCHES)
    p.add_argument("--lrs", type=float, nargs="+", default=LRS)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="seed 0, batches 8 16 32, 2 learning rates, 40 steps")
    p.add_argument("--figures-only", action="store_true", help="the figure and tables from the CSV; run nothing")
    add_places(p, "critical_batch_size")
    args = p.parse_args()
    args.targets, args.cap_override = TARGETS, None
    if args.tiny:
        args.seeds, args.batches, args.lrs, args.cap_override = [0], [8, 16, 32], [1e-2, 3e-2], 40
        args.targets = [2.2, 2.0, 1.8]
    if args.jobs < 1 or min(args.batches) < 2 or any(b % 2 for b in args.batches):
        sys.exit(f"{WHO}: --jobs must be >= 1 and every batch even (it is split in 2 micro-batches), >= 2")
    if not args.figures_only:
        if not os.access(args.attnlab, os.X_OK):
            sys.exit(f"{WHO}: no attnlab binary at {args.attnlab}; build it or pass --attnlab")
        os.makedirs(args.runs, exist_ok=True)
        os.makedirs(args.docs, exist_ok=True)
        measure(args)
    rows = read_rows(os.path.join(args.docs, "critical_batch_size.csv"), WHO)
    summ = summary(rows, targets_of(rows))
    for s in summ:
        f = s["fit"]
        print(f"target {s['target']:g}: {len(s['points'])} batches; " + (
            f"S_min {f[0]:.3g}, E_min {f[0] * f[1]:.3g}, B_crit {f[1]:.3g} (rms log10 {f[2]:.3f})" if f else "no fit")
            + f"; B_simple {spread(s['bsimple'])}")
    write_tables(args.docs, summ, rows)
    plot(args.docs, summ)


if __name__ == "__main__":
    main()
