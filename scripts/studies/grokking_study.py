#!/usr/bin/env python3
"""Grokking on modular arithmetic (Power et al. 2022; Nanda et al. 2023), docs/studies/grokking.md.

Four settings, all `--task modular --operation add` with a one-layer decoder without LayerNorm or biases
(ReLU MLP, `--layout bare`: "a + b =" then the answer), d 128, 4 heads, MLP 512, AdamW with betas (0.9, 0.98)
and weight decay on every parameter (`--decay-all`), full batch (every training pair in every step), each run
stopped at held-out exact match 0.99 (--target) or at its setting's step cap. Nanda's initialisation is Nanda
et al.'s scale: `--init gpt2 --init-std 1/sqrt(d) --positional learned` (weights N(0, 1/d)); the default is
attnlab's `--init auto` (PyTorch's layer defaults, token embeddings N(0, 1), sinusoidal positions).

  nanda               Nanda et al.'s: p 113, 30% of the pairs for training, lr 1e-3, weight decay 1, Nanda's
                      initialisation; seed 0 only (its CPU time is on the page).
  nanda-default-init  the same with attnlab's default initialisation.
  small               p 59, 40% of the pairs, lr 3e-3, Nanda's initialisation: weight decay 1 and 0, seeds 0 1 2
                      (the reproduction: memorise at A, generalise at B >= 5 A, and not without weight decay).
  sweep               p 59, half of the pairs, lr 3e-3, the default initialisation: weight decay 0 / 0.1 / 0.3 / 1,
                      and the training fraction swept at weight decay 1, seeds 0 1 2 per point.

Per run, from its metrics.csv (train and held-out accuracy and loss, weight norm, at every evaluation):
  memorised   A: the first evaluation whose interval had every training pair right (train_exact = 1);
  grokked     B: the first evaluation with held-out exact match >= 0.99 (empty if never, within the cap);
and from embedding_fourier.csv (each evaluation's Fourier norms of the residues' embeddings) the key frequencies
at the end: the fewest frequencies that hold half of the embedding's energy (the sum of squared norms).

    /usr/bin/python3 scripts/studies/grokking_study.py --attnlab build/attnlab --jobs 2  # runs, CSVs, page
    /usr/bin/python3 scripts/studies/grokking_study.py --figures-only  # figures and tables from the CSVs
    /usr/bin/python3 scripts/studies/grokking_study.py --tiny --runs /tmp/r --docs /tmp/d  # smoke run

Runs go under runs/grokking/; a row per run goes to docs/grokking.csv as soon as it ends (a run whose row is there
is not run again), with its date, CPU and CPU-seconds; the curves go to docs/grokking_curves.csv and the final
spectra to docs/grokking_fourier.csv. Writes three figures (docs/figures/grokking_curves.png, grokking_sweeps.png,
grokking_fourier.png) and the tables of docs/studies/grokking.md between its `<!-- BEGIN name -->` /
`<!-- END name -->` markers. One thread per run.
"""
import argparse
import datetime
import fcntl
import os
import sys
import threading

from attnlab_runs.files import read_csv, write_table
from attnlab_runs.launch import ROOT, run_child, run_pool
from attnlab_runs.study import add_places, cpu_kind, median, median_range, provenance, read_rows, replace_block

WHO = "grokking_study"
COMMON = ["--task", "modular", "--operation", "add", "--model", "decoder", "--layout", "bare", "--layers", "1",
          "--norm", "none", "--no-bias", "--activation", "relu", "--optimizer", "adamw", "--beta1", "0.9",
          "--beta2", "0.98", "--clip", "0", "--threads", "1"]
# name: (modulus, fraction, d_model, heads, d_ff, lr, step cap, evaluation interval, initialisation)
SETTINGS = {
    "nanda": (113, 0.3, 128, 4, 512, 1e-3, 20000, 200, "nanda"),
    "nanda-default-init": (113, 0.3, 128, 4, 512, 1e-3, 12000, 200, "default"),
    "small": (59, 0.4, 128, 4, 512, 3e-3, 6000, 100, "nanda"),
    "sweep": (59, 0.5, 128, 4, 512, 3e-3, 5000, 100, "default"),
}
PARTS = list(SETTINGS)
WEIGHT_DECAYS = [0.0, 0.1, 0.3, 1.0]
FRACTIONS = [0.2, 0.3, 0.4, 0.5, 0.6, 0.8]
KEY = ("setting", "fraction", "weight_decay", "seed")
FIELDS = ["setting", "modulus", "fraction", "weight_decay", "seed", "steps", "memorised_step", "grokked_step",
          "final_train_exact", "final_heldout_exact", "final_weight_norm", "key_frequencies", "key_share", "exit",
          "cpu_seconds", "date", "cpu"]
CURVE_FIELDS = ["setting", "fraction", "weight_decay", "seed", "step", "loss", "train_exact", "heldout_exact",
                "heldout_loss", "weight_norm"]
FOURIER_FIELDS = ["setting", "fraction", "weight_decay", "seed", "frequency", "norm"]


def run_name(setting, fraction, wd, seed):
    return f"{setting}-f{fraction:g}-wd{wd:g}-s{seed}"


def key_frequencies(spectrum):
    """The fewest frequencies (k >= 1) whose squared norms hold half of the energy of all of them, strongest first,
    and the share they hold."""
    energy = sorted(((n * n, k) for k, n in spectrum.items() if k > 0), reverse=True)
    total = sum(e for e, _ in energy) or 1.0
    keys, held = [], 0.0
    for e, k in energy:
        keys.append(k)
        held += e
        if held >= total / 2:
            break
    return keys, held / total


def init_flags(init, d):
    """The flags of an initialisation: Nanda et al.'s scale (weights N(0, 1/d), learned positions) or attnlab's."""
    return ["--init", "gpt2", "--init-std", f"{d ** -0.5:.4g}", "--positional", "learned"] if init == "nanda" else []


def one_run(args, setting, fraction, wd, seed):
    p, _, d, heads, d_ff, lr, cap, every, init = args.settings[setting]
    run = os.path.join(args.runs, run_name(setting, fraction, wd, seed))
    pairs = p * p
    batch = round(fraction * pairs)  # the whole training set: full batch
    cmd = [args.attnlab, "train"] + COMMON + [
        "--modulus", str(p), "--train-fraction", f"{fraction:g}", "--d-model", str(d), "--heads", str(heads),
        "--d-ff", str(d_ff), "--lr", f"{lr:g}", "--weight-decay", f"{wd:g}"] + ["--decay-all"] * (wd > 0) + [
        "--batch-size", str(batch), "--target", "0.99"] + init_flags(init, d) + [
        "--steps", str(cap), "--eval-every", str(every), "--log-every", str(every), "--seed", str(seed), "--quiet",
        "--overwrite", "--run", run]
    code, _, err, cpu = run_child(["nice"] + cmd)
    metrics = read_csv(os.path.join(run, "metrics.csv"), missing_ok=True)
    if code != 0 or not metrics:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}): {err.strip()}")
    evals = [r for r in metrics if r["heldout_exact"]]
    memorised = next((int(r["step"]) for r in metrics if float(r["train_exact"]) == 1.0), None)
    grokked = next((int(r["step"]) for r in evals if float(r["heldout_exact"]) >= 0.99), None)
    fourier = read_csv(os.path.join(run, "embedding_fourier.csv"))
    last = max(int(r["step"]) for r in fourier)
    spectrum = {int(r["frequency"]): float(r["norm"]) for r in fourier if int(r["step"]) == last}
    keys, share = key_frequencies(spectrum)
    ident = {"setting": setting, "fraction": f"{fraction:g}", "weight_decay": f"{wd:g}", "seed": seed}
    row = dict(ident, modulus=p, steps=cap, memorised_step=memorised or "", grokked_step=grokked or "",
               final_train_exact=evals[-1]["train_exact"], final_heldout_exact=evals[-1]["heldout_exact"],
               final_weight_norm=f"{float(metrics[-1]['weight_norm']):.4g}", key_frequencies=" ".join(map(str, keys)),
               key_share=f"{share:.3f}", exit=code, cpu_seconds=f"{cpu:.2f}",
               date=datetime.date.today().isoformat(), cpu=cpu_kind())
    curves = [dict(ident, step=r["step"], loss=f"{float(r['loss']):.4g}", train_exact=r["train_exact"],
                   heldout_exact=r["heldout_exact"], heldout_loss=f"{float(r['heldout_loss']):.4g}",
                   weight_norm=f"{float(r['weight_norm']):.4g}") for r in evals]
    spectra = [dict(ident, frequency=k, norm=f"{n:.5g}") for k, n in sorted(spectrum.items())]
    return row, curves, spectra


def jobs_of(args):
    """(setting, fraction, weight decay, seed) of every run of the parts: each Nanda setting once; the small setting
    at weight decay 1 and 0 per seed; the sweep's weight decays at its fraction and its fractions at weight decay 1."""
    out = [(s, args.settings[s][1], 1.0, 0) for s in ("nanda", "nanda-default-init") if s in args.parts]
    for seed in args.seeds if "small" in args.parts else []:
        out += [("small", args.settings["small"][1], wd, seed) for wd in (1.0, 0.0)]
    base = args.settings["sweep"][1]
    for seed in args.seeds if "sweep" in args.parts else []:
        out += [("sweep", base, wd, seed) for wd in args.weight_decays]
        out += [("sweep", f, 1.0, seed) for f in args.fractions if f != base or 1.0 not in args.weight_decays]
    return out


def measure(args):
    paths = [os.path.join(args.docs, f) for f in ("grokking.csv", "grokking_curves.csv", "grokking_fourier.csv")]
    done = {tuple(str(r[k]) for k in KEY) for r in read_rows(paths[0], WHO)}
    jobs = [j for j in jobs_of(args) if (j[0], f"{j[1]:g}", f"{j[2]:g}", str(j[3])) not in done]
    lock = threading.Lock()  # --jobs N: one writer of the CSVs at a time in this process
    order = (lambda r: (PARTS.index(r["setting"]), -float(r["weight_decay"]), float(r["fraction"]), int(r["seed"])))

    def job(j):
        row, run_curves, run_spectrum = one_run(args, *j)
        # Another driver (--parts nanda beside --parts sweep) may write the same CSVs: each write re-reads them
        # under a lock file beside the runs, so neither loses the other's rows.
        with lock, open(os.path.join(args.runs, "csv.lock"), "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            rows = read_rows(paths[0], WHO) + [row]
            rows.sort(key=order)
            write_table(paths[1], CURVE_FIELDS, read_csv(paths[1], missing_ok=True) + run_curves)
            write_table(paths[2], FOURIER_FIELDS, read_csv(paths[2], missing_ok=True) + run_spectrum)
            write_table(paths[0], FIELDS, rows)
        print(f"{run_name(*j)}: memorised at {row['memorised_step'] or '-'}, grokked at {row['grokked_step'] or '-'}; "
              f"key frequencies {row['key_frequencies']} ({row['cpu_seconds']} CPU-s)", flush=True)
    run_pool(job, jobs, args.jobs, WHO)


def points(rows, setting="sweep", **fixed):
    return [r for r in rows if r["setting"] == setting and all(float(r[k]) == v for k, v in fixed.items())]


def ratio(r):
    """B / A of a run that memorised and grokked, else None."""
    return int(r["grokked_step"]) / int(r["memorised_step"]) if r["grokked_step"] and r["memorised_step"] else None


def steps_cell(rs, key, cap):
    return median_range([int(r[key]) if r[key] else None for r in rs], cap)


def reproduction_table(rows, settings):
    """The small setting per seed: A and B with weight decay 1, B / A, and the same seed without weight decay."""
    cap = settings["small"][6]
    lines = ["| seed | memorised A (step) | held-out >= 99% B (step) | B / A | without weight decay: A, B | "
             "held-out exact at the end, with / without | weight norm at the end, with / without |",
             "|---|---|---|---|---|---|---|"]
    for r in points(rows, "small", weight_decay=1.0):
        z = next((z for z in points(rows, "small", weight_decay=0.0) if z["seed"] == r["seed"]), None)
        q = ratio(r)
        without = f"{z['memorised_step'] or f'> {cap}'}, {z['grokked_step'] or f'never by {cap}'}" if z else "not run"
        heldout = f"{float(r['final_heldout_exact']):.3f} / " + (f"{float(z['final_heldout_exact']):.3f}" if z else "-")
        norms = f"{r['final_weight_norm']} / {z['final_weight_norm'] if z else '-'}"
        lines.append(f"| {r['seed']} | {r['memorised_step'] or f'> {cap}'} | {r['grokked_step'] or f'never by {cap}'} | "
                     f"{f'{q:.1f}' if q else '-'} | {without} | {heldout} | {norms} |")
    return "\n".join(lines)


def tables(rows, settings):
    cap = settings["sweep"][6]
    wd_lines = ["| weight decay | seeds | memorised A (step) | held-out >= 99% B (step) | B / A | final weight norm |",
                "|---|---|---|---|---|---|"]
    for wd in sorted({float(r["weight_decay"]) for r in points(rows, fraction=settings["sweep"][1])}):
        rs = points(rows, fraction=settings["sweep"][1], weight_decay=wd)
        ratios = [q for q in map(ratio, rs) if q]
        wd_lines.append(f"| {wd:g} | {len(rs)} | {steps_cell(rs, 'memorised_step', cap)} | "
                        f"{steps_cell(rs, 'grokked_step', cap)} | "
                        f"{f'{median(ratios):.1f}' if ratios else '-'} | "
                        f"{median([float(r['final_weight_norm']) for r in rs]):.1f} |")
    f_lines = ["| training fraction | seeds | memorised A (step) | held-out >= 99% B (step) |", "|---|---|---|---|"]
    for f in sorted({float(r["fraction"]) for r in points(rows, weight_decay=1.0)}):
        rs = points(rows, weight_decay=1.0, fraction=f)
        f_lines.append(f"| {f:g} | {len(rs)} | {steps_cell(rs, 'memorised_step', cap)} | "
                       f"{steps_cell(rs, 'grokked_step', cap)} |")
    k_lines = ["| run | held-out exact | key frequencies (half the energy) | their share |", "|---|---|---|---|"]
    for r in rows:
        if r["setting"] != "sweep" or float(r["weight_decay"]) == 1.0 and float(r["fraction"]) == settings["sweep"][1]:
            k_lines.append(f"| {run_name(r['setting'], float(r['fraction']), float(r['weight_decay']), r['seed'])} | "
                           f"{float(r['final_heldout_exact']):.3f} | {r['key_frequencies']} | {float(r['key_share']):.2f} |")
    return "\n".join(wd_lines), "\n".join(f_lines), "\n".join(k_lines)


def write_page(docs, rows, settings):
    page = os.path.join(docs, "studies", "grokking.md")
    os.makedirs(os.path.dirname(page), exist_ok=True)
    text = open(page).read() if os.path.exists(page) else "# Grokking\n"
    wd, fr, keys = tables(rows, settings)
    nanda = [r for r in rows if r["setting"].startswith("nanda")]
    if nanda:
        text = replace_block(text, "nanda", "\n".join(
            f"- **{r['setting']}**: memorised (every training pair right) at step {r['memorised_step'] or '-'}; "
            f"held-out exact match >= 99% at step {r['grokked_step'] or 'never (by the cap)'}"
            f"{f' (B = {ratio(r):.1f}×A)' if ratio(r) else ''}, of {r['steps']}; final weight norm "
            f"{r['final_weight_norm']}; {float(r['cpu_seconds']):,.0f} CPU-seconds on {r['cpu']}." for r in nanda))
    text = replace_block(text, "reproduction", reproduction_table(rows, settings))
    text = replace_block(text, "weight_decay", wd)
    text = replace_block(text, "fraction", fr)
    text = replace_block(text, "frequencies", keys)
    cpu = sum(float(r["cpu_seconds"]) for r in rows)
    text = replace_block(text, "provenance", f"Ran {provenance(rows)}; {cpu:,.0f} CPU-seconds in all.")
    with open(page, "w") as f:
        f.write(text)


def plot(docs, rows, curves, spectra, settings):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from attnlab_runs.figures import save_figure
    os.makedirs(os.path.join(docs, "figures"), exist_ok=True)
    # 1: the curves of the Nanda settings and of the small setting's first seed with and without weight decay.
    shown = ([r for r in rows if r["setting"].startswith("nanda")] + points(rows, "small", weight_decay=1.0)[:1] +
             points(rows, "small", weight_decay=0.0)[:1])
    shown = shown or rows[:1]
    fig, axes = plt.subplots(len(shown), 3, figsize=(15, 3.8 * len(shown)), squeeze=False)
    for row_axes, r in zip(axes, shown):
        c = [x for x in curves if all(x[k] == str(r[k]) for k in KEY)]
        steps = [int(x["step"]) for x in c]
        name = run_name(r["setting"], float(r["fraction"]), float(r["weight_decay"]), r["seed"])
        row_axes[0].plot(steps, [float(x["train_exact"]) for x in c], label="training (full batch)")
        row_axes[0].plot(steps, [float(x["heldout_exact"]) for x in c], label="held-out")
        row_axes[1].plot(steps, [float(x["loss"]) for x in c], label="training")
        row_axes[1].plot(steps, [float(x["heldout_loss"]) for x in c], label="held-out")
        row_axes[2].plot(steps, [float(x["weight_norm"]) for x in c], color="tab:green")
        for ax, t in zip(row_axes, ("accuracy", "loss (nats)", "weight norm (all parameters)")):
            ax.set_xscale("log")
            ax.set_xlabel("step")
            ax.set_title(f"{name}: {t}", fontsize=9)
            ax.grid(alpha=0.3, which="both")
        row_axes[1].set_yscale("log")
        row_axes[0].legend(fontsize=7)
        row_axes[1].legend(fontsize=7)
    save_figure(fig, os.path.join(docs, "figures", "grokking_curves.png"),
                title="Accuracy, loss and weight norm at every evaluation", rect=(0, 0, 1, 0.98))
    plt.close(fig)
    # 2: steps to 99% held-out against weight decay and against the training fraction (Power et al.'s Figure 2).
    cap = settings["sweep"][6]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, fixed in ((axes[0], "weight_decay", {"fraction": settings["sweep"][1]}),
                           (axes[1], "fraction", {"weight_decay": 1.0})):
        rs = points(rows, **fixed)
        for what, marker, colour in (("grokked_step", "o", "tab:blue"), ("memorised_step", "s", "tab:orange")):
            xs = [float(r[key]) for r in rs]
            ys = [int(r[what]) if r[what] else cap for r in rs]
            ax.scatter(xs, ys, marker=marker, color=colour, alpha=0.7,
                       label=("held-out >= 99%" if what == "grokked_step" else "every training pair right") +
                       " (at the cap: never)" * (what == "grokked_step"))
        ax.axhline(cap, color="k", lw=0.5, ls=":")
        ax.set_yscale("log")
        ax.set_xlabel(key.replace("_", " "))
        ax.set_ylabel("step")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_title(f"weight decay (training fraction {settings['sweep'][1]:g})", fontsize=9)
    axes[1].set_title("training fraction (weight decay 1)", fontsize=9)
    axes[0].legend(fontsize=7)
    save_figure(fig, os.path.join(docs, "figures", "grokking_sweeps.png"),
                title=f"p = {settings['sweep'][0]}: steps to generalise, 3 seeds per point")
    plt.close(fig)
    # 3: the final embeddings' Fourier norms.
    shown = [r for r in rows if r["setting"] == "nanda"] + points(rows, "small", weight_decay=1.0)[:1]
    fig, axes = plt.subplots(1, len(shown), figsize=(6 * len(shown), 3.6), squeeze=False)
    for ax, r in zip(axes[0], shown):
        s = [x for x in spectra if all(x[k] == str(r[k]) for k in KEY)]
        ax.bar([int(x["frequency"]) for x in s], [float(x["norm"]) for x in s], color="tab:purple")
        ax.set_title(f"{run_name(r['setting'], float(r['fraction']), float(r['weight_decay']), r['seed'])}: key "
                     f"frequencies {r['key_frequencies']}", fontsize=9)
        ax.set_xlabel("frequency k")
        ax.set_ylabel("norm of the embedding's component")
    save_figure(fig, os.path.join(docs, "figures", "grokking_fourier.png"),
                title="Fourier components of the trained embedding of the residues")
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--parts", nargs="+", choices=PARTS, default=PARTS,
                   help="which settings to run (a driver per part may run at the same time)")
    p.add_argument("--tiny", action="store_true", help="p 7, width 32, 400 steps: a smoke run of the whole driver")
    p.add_argument("--figures-only", action="store_true", help="the figures and tables from the CSVs; run nothing")
    add_places(p, "grokking")
    args = p.parse_args()
    args.settings, args.weight_decays, args.fractions = dict(SETTINGS), WEIGHT_DECAYS, FRACTIONS
    if args.tiny:
        args.seeds, args.weight_decays, args.fractions = [0], [0.0, 1.0], [0.5, 0.8]
        args.settings = {name: (7, 0.5, 32, 2, 64, 1e-2, 400, 20, s[8]) for name, s in SETTINGS.items()}
    if args.jobs < 1:
        sys.exit(f"{WHO}: --jobs must be >= 1")
    if not args.figures_only:
        if not os.access(args.attnlab, os.X_OK):
            sys.exit(f"{WHO}: no attnlab binary at {args.attnlab}; build it or pass --attnlab")
        os.makedirs(args.runs, exist_ok=True)
        os.makedirs(args.docs, exist_ok=True)
        measure(args)
    rows = read_rows(os.path.join(args.docs, "grokking.csv"), WHO)
    curves = read_csv(os.path.join(args.docs, "grokking_curves.csv"), missing_ok=True)
    spectra = read_csv(os.path.join(args.docs, "grokking_fourier.csv"), missing_ok=True)
    if not rows:
        sys.exit(f"{WHO}: no runs in {os.path.join(args.docs, 'grokking.csv')} yet")
    write_page(args.docs, rows, args.settings)
    plot(args.docs, rows, curves, spectra, args.settings)


if __name__ == "__main__":
    main()
