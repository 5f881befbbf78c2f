#!/usr/bin/env python3
"""The edge of stability on a small transformer (Cohen et al. 2021; for Adam, Cohen et al. 2022).

Full-batch training (--train-size N --batch-size N: every step's batch is the whole training set, so
gradient descent is gradient descent) of the encoder tagger on reverse, with the sharpness probe
(--probe-sharpness K: λ_max of the training loss's Hessian, and under Adam λ_max(P⁻¹H)) every K steps:
  gd    --optimizer sgd --momentum 0 at each of --gd-lrs; threshold 2/η
  adam  --optimizer adam --beta1 0.9 --beta2 0.999 at each of --adam-lrs; threshold 38/η (on P⁻¹H)
no weight decay, no clipping, a constant learning rate, no dropout, one thread, seeds 0-2.

    /usr/bin/python3 scripts/studies/edge_of_stability_study.py              # 2 optimizers x 3 lrs x 3 seeds
    /usr/bin/python3 scripts/studies/edge_of_stability_study.py --jobs 2
    /usr/bin/python3 scripts/studies/edge_of_stability_study.py --figures-only  # figure and table from the CSVs
    /usr/bin/python3 scripts/studies/edge_of_stability_study.py --tiny          # seconds: a smoke run

Rows go to docs/edge_of_stability.csv (one per probe: the run's optimizer, lr, seed, the step, the
operator, λ_max, its threshold, the probe batch's loss; with the date, the CPU and the run's CPU-seconds)
and docs/edge_of_stability_loss.csv (the training loss every step); the figure to
docs/figures/edge_of_stability.png; the table of per-run measures to docs/studies/edge_of_stability.md
between <!-- BEGIN edge-of-stability --> and <!-- END edge-of-stability -->. Run directories go to
runs/edge_of_stability/.
"""
import argparse
import datetime
import os

from attnlab_runs.files import read_csv, write_table
from attnlab_runs.launch import ROOT, run_pool, train
from attnlab_runs.study import add_places, cpu_kind, median, read_rows, replace_block

MODEL = ["--task", "reverse", "--vocab", "10", "--min-len", "8", "--max-len", "8", "--model", "encoder",
         "--d-model", "32", "--heads", "2", "--layers", "2", "--d-ff", "64", "--init", "torch"]
FIXED = ["--weight-decay", "0", "--clip", "0", "--schedule", "constant", "--dropout", "0", "--threads", "1",
         "--log-every", "1", "--target", "0", "--heldout", "200"]
OPTIMIZERS = {"gd": ["--optimizer", "sgd", "--momentum", "0"],
              "adam": ["--optimizer", "adam", "--beta1", "0.9", "--beta2", "0.999"]}
OPERATOR = {"gd": "hessian", "adam": "preconditioned"}  # the one with the optimizer's threshold
PROBE_COLUMNS = ["optimizer", "lr", "seed", "step", "operator", "lambda_max", "threshold", "loss", "converged",
                 "date", "cpu", "cpu_seconds"]
LOSS_COLUMNS = ["optimizer", "lr", "seed", "step", "loss"]
EDGE = 0.1  # "at the edge": within 10% of the threshold


def run_name(optimizer, lr, seed):
    return f"{optimizer}-lr{lr:g}-s{seed}"


def job_flags(args, optimizer, lr, seed):
    return (MODEL + FIXED + OPTIMIZERS[optimizer] +
            ["--lr", f"{lr:g}", "--seed", str(seed), "--steps", str(args.steps), "--train-size", str(args.train_size),
             "--batch-size", str(args.train_size), "--probe-sharpness", str(args.probe_every),
             "--eval-every", str(args.steps)])


def run_one(args, job):
    """One run; its probe rows and its loss every step."""
    optimizer, lr, seed = job
    run = os.path.join(args.runs, run_name(optimizer, lr, seed))
    _, cpu = train(args.attnlab, run, job_flags(args, optimizer, lr, seed))
    key = {"optimizer": optimizer, "lr": f"{lr:g}", "seed": seed}
    where = {"date": datetime.date.today().isoformat(), "cpu": cpu_kind(), "cpu_seconds": f"{cpu:.1f}"}
    probes = [dict(key, step=r["step"], operator=r["operator"], lambda_max=r["lambda_max"], threshold=r["threshold"],
                   loss=r["loss"], converged=r["converged"], **where)
              for r in read_csv(os.path.join(run, "probe_sharpness.csv"))]
    losses = [dict(key, step=r["step"], loss=r["loss"]) for r in read_csv(os.path.join(run, "metrics.csv"))]
    return probes, losses


def run_measures(probes, losses):
    """One run's measures against its optimizer's threshold: λ at step 1, its largest, the first probe at
    90% of the threshold, the share of later probes within 10% of it, and the loss's rises after that."""
    p = [r for r in probes if r["operator"] == OPERATOR[r["optimizer"]]]
    lam = [float(r["lambda_max"]) for r in p]
    threshold = float(p[0]["threshold"])
    steps = [int(r["step"]) for r in p]
    reach = next((s for s, v in zip(steps, lam) if v >= (1 - EDGE) * threshold), None)
    after = [v for s, v in zip(steps, lam) if reach is not None and s > reach]
    at_edge = sum(abs(v / threshold - 1) <= EDGE for v in after) / len(after) if after else None
    loss = [(int(r["step"]), float(r["loss"])) for r in losses]
    tail = [v for s, v in loss if reach is not None and s >= reach]
    rises = sum(b > a for a, b in zip(tail, tail[1:]))
    return {"lambda_first": lam[0], "lambda_max": max(lam), "threshold": threshold, "reach": reach,
            "at_edge": at_edge, "rises": rises if reach is not None else None,
            "loss_first": loss[0][1], "loss_reach": tail[0] if tail else None, "loss_last": loss[-1][1]}


def measures_by_run(probe_rows, loss_rows):
    keys = list(dict.fromkeys((r["optimizer"], r["lr"], r["seed"]) for r in probe_rows))
    out = {}
    for k in keys:
        def mine(rows):
            return [r for r in rows if (r["optimizer"], r["lr"], r["seed"]) == k]
        out[k] = run_measures(mine(probe_rows), mine(loss_rows))
    return out


def shown(v, digits=3):
    return "—" if v is None else f"{v:.{digits}g}"


def percent(v):
    return "—" if v is None else f"{100 * v:.0f}%"


def loss_path(m):
    return f"{m['loss_first']:.2f} → {shown(m['loss_reach'])} → {m['loss_last']:.3f}"


TABLE_COLUMNS = [  # header, the value of one run's measures
    ("λ at step 1", lambda m: shown(m["lambda_first"])),
    ("largest λ", lambda m: shown(m["lambda_max"])),
    ("first step at 90%", lambda m: str(m["reach"] or "—")),
    ("probes after it within 10%", lambda m: percent(m["at_edge"])),
    ("loss rises after it (steps)", lambda m: "—" if m["rises"] is None else str(m["rises"])),
    ("loss: start → at 90% → end", loss_path),
]


def table(measures, cpu_seconds):
    """Markdown: one row per optimizer and lr, the seeds' values side by side (seed 0, 1, 2)."""
    head = ["optimizer", "η", "threshold"] + [h for h, _ in TABLE_COLUMNS] + ["CPU-s (median)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cells = {}
    for (opt, lr, seed), m in measures.items():
        cells.setdefault((opt, lr), []).append((int(seed), m))
    for (opt, lr), runs in cells.items():
        runs.sort(key=lambda x: x[0])
        row = [opt, lr, f"{runs[0][1]['threshold']:.4g}"]
        row += [", ".join(f(m) for _, m in runs) for _, f in TABLE_COLUMNS]
        row.append(f"{median(cpu_seconds[(opt, lr)]):.0f}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot(probe_rows, loss_rows, out):
    """Cohen et al.'s figure 1 layout: per optimizer, the training loss and the sharpness over steps (seed 0),
    one colour per lr, each threshold dashed in its colour."""
    import matplotlib.pyplot as plt
    from attnlab_runs.figures import save_figure
    optimizers = [o for o in OPTIMIZERS if any(r["optimizer"] == o for r in probe_rows)]
    fig, axes = plt.subplots(len(optimizers), 2, figsize=(10, 3.4 * len(optimizers)), squeeze=False)
    for row, opt in zip(axes, optimizers):
        lrs = list(dict.fromkeys(r["lr"] for r in probe_rows if r["optimizer"] == opt))
        for k, lr in enumerate(lrs):
            colour = f"C{k}"
            loss = [r for r in loss_rows if (r["optimizer"], r["lr"], r["seed"]) == (opt, lr, "0")]
            row[0].plot([int(r["step"]) for r in loss], [float(r["loss"]) for r in loss], color=colour, lw=0.8,
                        label=f"η = {lr}")
            p = [r for r in probe_rows if (r["optimizer"], r["lr"], r["seed"]) == (opt, lr, "0")
                 and r["operator"] == OPERATOR[opt]]
            row[1].plot([int(r["step"]) for r in p], [float(r["lambda_max"]) for r in p], color=colour, lw=1,
                        marker=".", ms=3, label=f"η = {lr}")
            row[1].axhline(float(p[0]["threshold"]), color=colour, ls="--", lw=0.8)
        what = "λ_max(H), 2/η dashed" if opt == "gd" else "λ_max(P⁻¹H), 38/η dashed"
        row[0].set_title(f"{opt}: training loss (full batch)", fontsize=10)
        row[0].set_yscale("log")
        row[1].set_title(f"{opt}: {what}", fontsize=10)
        row[1].legend(fontsize=8)
    save_figure(fig, out, step_axes=[a for r in axes for a in r])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--gd-lrs", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    p.add_argument("--adam-lrs", type=float, nargs="+", default=[5e-4, 1e-3, 2e-3])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--train-size", type=int, default=512)
    p.add_argument("--probe-every", type=int, default=20)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="one lr per optimizer, seed 0, 30 steps: a smoke run")
    p.add_argument("--figures-only", action="store_true", help="the figure and the table from the CSVs")
    add_places(p, "edge_of_stability")
    args = p.parse_args()
    if args.tiny:
        args.gd_lrs, args.adam_lrs, args.seeds, args.steps, args.train_size, args.probe_every = [0.1], [1e-3], [0], 30, 64, 10
    probes_csv = os.path.join(args.docs, "edge_of_stability.csv")
    losses_csv = os.path.join(args.docs, "edge_of_stability_loss.csv")
    if not args.figures_only:
        jobs = [("gd", lr, s) for lr in args.gd_lrs for s in args.seeds] + \
               [("adam", lr, s) for lr in args.adam_lrs for s in args.seeds]
        results = run_pool(lambda j: run_one(args, j), jobs, args.jobs, "edge_of_stability_study")
        write_table(probes_csv, PROBE_COLUMNS, [r for probes, _ in results for r in probes])
        write_table(losses_csv, LOSS_COLUMNS, [r for _, losses in results for r in losses])
    probe_rows = read_rows(probes_csv, "edge_of_stability_study")
    loss_rows = read_csv(losses_csv)
    cpu = {}
    for r in probe_rows:
        cpu.setdefault((r["optimizer"], r["lr"]), {})[r["seed"]] = float(r["cpu_seconds"])
    text = table(measures_by_run(probe_rows, loss_rows), {k: list(v.values()) for k, v in cpu.items()})
    print(text)
    os.makedirs(os.path.join(args.docs, "figures"), exist_ok=True)
    plot(probe_rows, loss_rows, os.path.join(args.docs, "figures", "edge_of_stability.png"))
    page = os.path.join(args.docs, "studies", "edge_of_stability.md")
    if os.path.exists(page):
        with open(page) as f:
            body = f.read()
        with open(page, "w") as f:
            f.write(replace_block(body, "edge-of-stability", text))


if __name__ == "__main__":
    main()
