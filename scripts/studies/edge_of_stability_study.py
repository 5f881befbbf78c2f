#!/usr/bin/env python3
"""The edge of stability on a small transformer (Cohen et al. 2021; for Adam, Cohen et al. 2022).

Full-batch training (--train-size N --batch-size N: every step's batch is the whole training set, so
gradient descent is gradient descent) of a 2-block decoder on 3-digit addition, with the sharpness probe
(--probe-sharpness K: λ_max of the training loss's Hessian, and under Adam λ_max(P⁻¹H)) every K steps:
  gd    --optimizer sgd --momentum 0 at each of --gd-lrs; threshold 2/η on λ_max(H)
  adam  --optimizer adam --beta1 0.9 --beta2 0.999 at each of --adam-lrs; threshold 38/η on λ_max(P⁻¹H)
no weight decay, no clipping, a constant learning rate, no dropout, one thread, seeds 0-2.

    /usr/bin/python3 scripts/studies/edge_of_stability_study.py              # 2 optimizers x lrs x 3 seeds
    /usr/bin/python3 scripts/studies/edge_of_stability_study.py --figures-only  # figure and table from the CSVs
    /usr/bin/python3 scripts/studies/edge_of_stability_study.py --tiny          # seconds: a smoke run

Files, in --docs: edge_of_stability.csv (one row per probe: the run's optimizer, lr and seed, the step, the
operator, λ_max, its threshold, the probe batch's loss), edge_of_stability_runs.csv (one row per run: the
training loss at its first and last step, how often it rose after the sharpness first reached 90% of the
threshold, the date, the CPU and the run's CPU-seconds), edge_of_stability_loss.csv (the training loss at
every step of seed 0's runs, for the figure); figures/edge_of_stability.png; the table of per-run measures
in studies/edge_of_stability.md between <!-- BEGIN edge-of-stability --> and <!-- END edge-of-stability -->.
Run directories go to runs/edge_of_stability/.
"""
import argparse
import datetime
import os

from attnlab_runs.files import read_csv, write_table
from attnlab_runs.launch import ROOT, run_pool, train
from attnlab_runs.study import add_places, cpu_kind, median, read_rows, replace_block

MODEL = ["--task", "add", "--digits", "3", "--model", "decoder", "--d-model", "32", "--heads", "2",
         "--layers", "2", "--d-ff", "64"]
FIXED = ["--weight-decay", "0", "--clip", "0", "--schedule", "constant", "--dropout", "0", "--threads", "1",
         "--log-every", "1", "--target", "0", "--heldout", "200"]
OPTIMIZERS = {"gd": ["--optimizer", "sgd", "--momentum", "0"],
              "adam": ["--optimizer", "adam", "--beta1", "0.9", "--beta2", "0.999"]}
OPERATOR = {"gd": "hessian", "adam": "preconditioned"}  # the one with the optimizer's threshold
PROBE_COLUMNS = ["optimizer", "lr", "seed", "step", "operator", "lambda_max", "threshold", "loss"]
RUN_COLUMNS = ["optimizer", "lr", "seed", "steps", "loss_first", "loss_last", "rises", "date", "cpu",
               "cpu_seconds"]
LOSS_COLUMNS = ["optimizer", "lr", "seed", "step", "loss"]
EDGE = 0.1  # "at the edge": within 10% of the threshold
REACH = 0.9  # the sharpness has reached the threshold at 90% of it


def run_name(optimizer, lr, seed):
    return f"{optimizer}-lr{lr:g}-s{seed}"


def job_flags(args, optimizer, lr, seed):
    return (MODEL + FIXED + OPTIMIZERS[optimizer] +
            ["--lr", f"{lr:g}", "--seed", str(seed), "--steps", str(args.steps), "--train-size", str(args.train_size),
             "--batch-size", str(args.train_size), "--probe-sharpness", str(args.probe_every),
             "--eval-every", str(args.steps)])


def reach_step(probes):
    """The first probed step at which the optimizer's operator rose to 90% of its threshold from below it (None:
    never). From below: Adam's first probes can start above it, P being the first steps' squared gradients."""
    mine = [r for r in probes if r["operator"] == OPERATOR[r["optimizer"]]]
    high = [float(r["lambda_max"]) >= REACH * float(r["threshold"]) for r in mine]
    return next((int(r["step"]) for k, r in enumerate(mine) if high[k] and k and not high[k - 1]), None)


def rises_after(losses, reach):
    """How many times the training loss rose after the probe at step `reach` (None when the sharpness never got
    there). A probe at step t sees the parameters after t updates: metrics.csv's loss at step t + 1."""
    if reach is None:
        return None
    tail = [float(r["loss"]) for r in losses if int(r["step"]) > reach]
    return sum(b > a for a, b in zip(tail, tail[1:]))


def run_one(args, job):
    """One run: its probe rows, its row of the runs table, and its loss at every step."""
    optimizer, lr, seed = job
    run = os.path.join(args.runs, run_name(optimizer, lr, seed))
    _, cpu = train(args.attnlab, run, job_flags(args, optimizer, lr, seed))
    key = {"optimizer": optimizer, "lr": f"{lr:g}", "seed": str(seed)}
    own_probes = [dict(key, **r) for r in read_csv(os.path.join(run, "probe_sharpness.csv"))]
    own_losses = read_csv(os.path.join(run, "metrics.csv"))
    rises = rises_after(own_losses, reach_step(own_probes))  # at full precision: rounding makes ties
    probes = [dict(key, step=r["step"], operator=r["operator"], lambda_max=f"{float(r['lambda_max']):.6g}",
                   threshold=r["threshold"], loss=f"{float(r['loss']):.6g}") for r in own_probes]
    losses = [dict(key, step=r["step"], loss=f"{float(r['loss']):.6g}") for r in own_losses]
    summary = dict(key, steps=losses[-1]["step"], loss_first=losses[0]["loss"], loss_last=losses[-1]["loss"],
                   rises="" if rises is None else str(rises), date=datetime.date.today().isoformat(),
                   cpu=cpu_kind(), cpu_seconds=f"{cpu:.1f}")
    return probes, summary, losses


def run_measures(probes, summary):
    """One run's measures against its optimizer's threshold: λ at step 1, its largest value, the first probe
    at 90% of the threshold, then over the later probes the median of λ/threshold, the share within 10% of
    it and the share more than 10% above it; the training loss's rises after that step, and its path; the
    Hessian's own λ_max at the first and last probes (under Adam, beside the preconditioned one)."""
    p = [r for r in probes if r["operator"] == OPERATOR[r["optimizer"]]]
    lam = [float(r["lambda_max"]) for r in p]
    hessian = [float(r["lambda_max"]) for r in probes if r["operator"] == "hessian"]
    threshold = float(p[0]["threshold"])
    reach = reach_step(probes)
    after = [v / threshold for r, v in zip(p, lam) if reach is not None and int(r["step"]) > reach]
    return {"lambda_first": lam[0], "lambda_max": max(lam), "threshold": threshold, "reach": reach,
            "ratio": median(after) if after else None,
            "at_edge": sum(abs(x - 1) <= EDGE for x in after) / len(after) if after else None,
            "above": sum(x > 1 + EDGE for x in after) / len(after) if after else None,
            "rises": summary["rises"] or None, "steps": int(summary["steps"]),
            "loss_first": float(summary["loss_first"]), "loss_last": float(summary["loss_last"]),
            "hessian": (hessian[0], hessian[-1])}


def shown(v, digits=3):
    return "—" if v is None else f"{v:.{digits}g}"


def percent(v):
    return "—" if v is None else f"{100 * v:.0f}%"


TABLE_COLUMNS = [  # header, the value of one run's measures
    ("λ at step 1", lambda m: shown(m["lambda_first"])),
    ("largest λ", lambda m: shown(m["lambda_max"])),
    ("first step at 90%", lambda m: str(m["reach"] or "—")),
    ("after it: median λ/threshold", lambda m: shown(m["ratio"], 2)),
    ("within 10%", lambda m: percent(m["at_edge"])),
    ("above 110%", lambda m: percent(m["above"])),
    ("loss rises after it", lambda m: m["rises"] or "—"),
    ("loss: start → end", lambda m: f"{m['loss_first']:.2f} → {m['loss_last']:.3f}"),
    ("λ_max(H): first → last probe", lambda m: f"{m['hessian'][0]:.3g} → {m['hessian'][1]:.3g}"),
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
        row[0].set_title(f"{opt}: training loss (full batch, seed 0)", fontsize=10)
        row[0].set_yscale("log")
        row[0].legend(fontsize=8)
        row[1].set_title(f"{opt}: {what}", fontsize=10)
        row[1].legend(fontsize=8)
    save_figure(fig, out, step_axes=[a for r in axes for a in r])


def run_all(args, paths):
    jobs = [("gd", lr, s) for lr in args.gd_lrs for s in args.seeds] + \
           [("adam", lr, s) for lr in args.adam_lrs for s in args.seeds]
    results = run_pool(lambda j: run_one(args, j), jobs, args.jobs, "edge_of_stability_study")
    os.makedirs(args.docs, exist_ok=True)
    write_table(paths["probes"], PROBE_COLUMNS, [r for probes, _, _ in results for r in probes])
    write_table(paths["runs"], RUN_COLUMNS, [summary for _, summary, _ in results])
    write_table(paths["loss"], LOSS_COLUMNS, [r for _, _, losses in results for r in losses if r["seed"] == "0"])


def report(args, paths):
    """The table (printed, and into the page when it exists) and the figure, from the CSVs alone."""
    probe_rows = read_csv(paths["probes"])
    runs = read_rows(paths["runs"], "edge_of_stability_study")
    measures, cpu = {}, {}
    for s in runs:
        key = (s["optimizer"], s["lr"], s["seed"])
        measures[key] = run_measures([r for r in probe_rows if (r["optimizer"], r["lr"], r["seed"]) == key], s)
        cpu.setdefault(key[:2], []).append(float(s["cpu_seconds"]))
    text = table(measures, cpu)
    print(text)
    os.makedirs(os.path.join(args.docs, "figures"), exist_ok=True)
    plot(probe_rows, read_csv(paths["loss"]), os.path.join(args.docs, "figures", "edge_of_stability.png"))
    page = os.path.join(args.docs, "studies", "edge_of_stability.md")
    if os.path.exists(page):
        with open(page) as f:
            body = f.read()
        with open(page, "w") as f:
            f.write(replace_block(body, "edge-of-stability", text))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--gd-lrs", type=float, nargs="+", default=[0.1, 0.2, 0.4])
    p.add_argument("--adam-lrs", type=float, nargs="+", default=[1e-3, 3e-3])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--train-size", type=int, default=1024)
    p.add_argument("--probe-every", type=int, default=20)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="one lr per optimizer, seed 0, 12 steps: a smoke run")
    p.add_argument("--figures-only", action="store_true", help="the figure and the table from the CSVs")
    add_places(p, "edge_of_stability")
    args = p.parse_args()
    if args.tiny:
        args.gd_lrs, args.adam_lrs, args.seeds, args.steps, args.train_size, args.probe_every = \
            [0.5], [3e-3], [0], 12, 64, 2
    paths = {name: os.path.join(args.docs, f"edge_of_stability{suffix}.csv")
             for name, suffix in (("probes", ""), ("runs", "_runs"), ("loss", "_loss"))}
    if not args.figures_only:
        run_all(args, paths)
    report(args, paths)


if __name__ == "__main__":
    main()
