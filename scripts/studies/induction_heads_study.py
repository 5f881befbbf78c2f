#!/usr/bin/env python3
"""Induction heads and their phase change (Olsson et al. 2022; Elhage et al. 2021), docs/studies/induction_heads.md.

Attention-only decoders (no MLP; pre-LN) trained as language models on `--task repeat`: windows of L random
symbols (L uniform in MIN_LEN..MAX_LEN, so a head cannot find the earlier copy by its distance) and the same L
again. Two layers, and the one-layer control; seeds 0 1 2. Every EVERY steps the run records the held-out
in-context loss (metrics.csv: the repeat's loss less the first copy's) and every head's prefix-matching and
previous-token scores (probe_induction.csv, train --probe-induction). Per run:

  loss drop   (two layers) the first evaluation at which the in-context loss is below the midpoint between the
              one-layer control's final in-context loss (same seed: what the context gives without an induction
              head, e.g. copying any token of the first copy) and -ln vocab (the repeat copied perfectly);
  score jump  the first probe at which a last-layer head's prefix-matching score is above 0.5;
  ablation    `attnlab ablate` (zero) of the last-layer head with the highest final prefix-matching score, and of
              the first-layer head with the highest previous-token score: the held-out late-token accuracy (the
              repeat's) intact and with each knocked out.

    /usr/bin/python3 scripts/studies/induction_heads_study.py --attnlab build/attnlab  # runs, CSVs, figure, page
    /usr/bin/python3 scripts/studies/induction_heads_study.py --figures-only  # figure and tables from the CSVs
    /usr/bin/python3 scripts/studies/induction_heads_study.py --tiny --runs /tmp/r --docs /tmp/d  # smoke run

Runs go under runs/induction_heads/; a row per run goes to docs/induction_heads.csv as soon as it ends (a run
whose row is there is not run again), with its date, CPU and CPU-seconds, and its curves to
docs/induction_heads_curves.csv. Writes docs/figures/induction_heads.png and the tables of
docs/studies/induction_heads.md between its `<!-- BEGIN name -->` / `<!-- END name -->` markers. One thread
per run.
"""
import argparse
import datetime
import json
import math
import os
import sys
import threading

from attnlab_runs.files import read_csv, write_table
from attnlab_runs.launch import ROOT, run_child, run_pool
from attnlab_runs.study import add_places, cpu_kind, median, provenance, read_rows, replace_block

WHO = "induction_heads_study"
VOCAB, MIN_LEN, MAX_LEN = 64, 8, 16
MODEL = ["--model", "decoder", "--attention-only", "--d-model", "64", "--heads", "4"]
OPTIM = ["--optimizer", "adamw", "--batch-size", "32"]
LR = 1e-3
STEPS, EVERY, HELDOUT = 6000, 25, 200
COARSE = 100  # the coarser evaluation interval the tables also read the two steps at (every 4th evaluation)
LAYERS = [2, 1]
FIELDS = ["layers", "seed", "steps", "final_in_context_loss", "final_late_acc", "drop_threshold", "loss_drop_step",
          "score_jump_step",
          "induction_head", "prefix_score", "previous_head", "previous_score", "induction_heads", "late_acc_intact",
          "late_acc_without_induction_head", "late_acc_without_induction_heads", "late_acc_without_previous_head",
          "exit", "cpu_seconds", "date", "cpu"]
CURVE_FIELDS = ["layers", "seed", "step", "in_context_loss", "best_prefix", "best_previous"]


def run_dir(args, layers, seed):
    return os.path.join(args.runs, f"L{layers}-s{seed}")


def first_step(points, passed):
    """The first step of [(step, value)] whose value passes, or None."""
    return next((s for s, v in points if passed(v)), None)


def head_scores(run):
    """{step: {(layer, head): (prefix_matching, previous_token)}} from probe_induction.csv (layer "blocks.N.attn")."""
    out = {}
    for r in read_csv(os.path.join(run, "probe_induction.csv")):
        out.setdefault(int(r["step"]), {})[(int(r["layer"].split(".")[1]), int(r["head"]))] = (
            float(r["prefix_matching"]), float(r["previous_token"]))
    return out


def ablate_late(args, run, components):
    """The held-out late-token accuracy with `components` zero-ablated together, and intact."""
    what = ",".join(components)
    code, out, err, _ = run_child(["nice", args.attnlab, "ablate", "--run", run, "--json", "--what", what, "--together"])
    if code != 0:
        raise RuntimeError(f"attnlab ablate --run {run} --what {what} --together failed ({code}): {err.strip()}")
    got = json.loads(out)
    return got["rows"][0]["late_token_accuracy"], got["intact"]["late_token_accuracy"]


def one_run(args, layers, seed):
    """Train one run and read its row and curves back from its files."""
    run = run_dir(args, layers, seed)
    cmd = [args.attnlab, "train", "--task", "repeat", "--vocab", str(args.vocab), "--min-len", str(args.min_len),
           "--max-len", str(args.max_len)] + args.model + ["--layers", str(layers)] + OPTIM + [
        "--lr", f"{args.lr:g}", "--steps", str(args.steps), "--eval-every", str(args.every), "--log-every", str(args.every),
        "--probe-induction", str(args.every), "--heldout", str(args.heldout), "--seed", str(seed), "--threads", "1",
        "--quiet", "--overwrite", "--run", run]
    code, _, err, cpu = run_child(["nice"] + cmd)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}): {err.strip()}")
    loss = [(int(r["step"]), float(r["in_context_loss"])) for r in read_csv(os.path.join(run, "metrics.csv"))
            if r["in_context_loss"]]
    scores = head_scores(run)
    last = layers - 1
    prefix = [(s, max(v[0] for (lay, _), v in h.items() if lay == last)) for s, h in sorted(scores.items())]
    previous = [(s, max(v[1] for (lay, _), v in h.items() if lay == 0)) for s, h in sorted(scores.items())]
    final = scores[max(scores)]
    ind = max((k for k in final if k[0] == last), key=lambda k: final[k][0])
    prev = max((k for k in final if k[0] == 0), key=lambda k: final[k][1])
    summary = json.load(open(os.path.join(run, "summary.json")))
    row = {"layers": layers, "seed": seed, "steps": args.steps, "final_in_context_loss": f"{loss[-1][1]:.4g}",
           "final_late_acc": f"{summary['heldout_late_token_acc']:.4g}",
           "loss_drop_step": "",  # drop_steps fills it in once the seed's control has run
           "score_jump_step": first_step(prefix, lambda v: v > 0.5) or "",
           "drop_threshold": "", "induction_head": f"blocks.{ind[0]}.attn.h{ind[1]}", "prefix_score": f"{final[ind][0]:.3g}",
           "previous_head": f"blocks.{prev[0]}.attn.h{prev[1]}", "previous_score": f"{final[prev][1]:.3g}",
           "induction_heads": "", "late_acc_intact": "", "late_acc_without_induction_head": "",
           "late_acc_without_induction_heads": "", "late_acc_without_previous_head": "",
           "exit": code, "cpu_seconds": f"{cpu:.2f}", "date": datetime.date.today().isoformat(), "cpu": cpu_kind()}
    if layers > 1:
        # Every last-layer head above 0.5 at the end (a model may keep two), or the best one.
        heads = [f"blocks.{k[0]}.attn.h{k[1]}" for k in sorted(final) if k[0] == last and final[k][0] > 0.5]
        heads = heads or [row["induction_head"]]
        without_ind, intact = ablate_late(args, run, [row["induction_head"]])
        without_all, _ = ablate_late(args, run, heads)
        without_prev, _ = ablate_late(args, run, [row["previous_head"]])
        row.update({"induction_heads": " + ".join(heads), "late_acc_intact": f"{intact:.4g}",
                    "late_acc_without_induction_head": f"{without_ind:.4g}",
                    "late_acc_without_induction_heads": f"{without_all:.4g}",
                    "late_acc_without_previous_head": f"{without_prev:.4g}"})
    by_step = dict(loss)
    curves = [{"layers": layers, "seed": seed, "step": s, "in_context_loss": f"{by_step[s]:.4g}" if s in by_step else "",
               "best_prefix": f"{p:.4g}", "best_previous": f"{q:.4g}"} for (s, p), (_, q) in zip(prefix, previous)]
    return row, curves


def drop_steps(rows, curves, vocab):
    """Each two-layer row's loss-drop step from its curve and its seed's one-layer control; the threshold too."""
    control = {r["seed"]: float(r["final_in_context_loss"]) for r in rows if int(r["layers"]) == 1}
    for r in rows:
        if int(r["layers"]) == 1 or r["seed"] not in control:
            continue
        threshold = (control[r["seed"]] - math.log(vocab)) / 2
        loss = [(int(c["step"]), float(c["in_context_loss"])) for c in curves
                if c["layers"] == r["layers"] and c["seed"] == r["seed"] and c["in_context_loss"]]
        r["loss_drop_step"] = first_step(loss, lambda v: v < threshold) or ""
        r["drop_threshold"] = f"{threshold:.4g}"


def measure(args):
    path, curves_path = (os.path.join(args.docs, f) for f in ("induction_heads.csv", "induction_heads_curves.csv"))
    rows, curves = read_rows(path, WHO), read_csv(curves_path, missing_ok=True)
    done = {(r["layers"], r["seed"]) for r in rows}
    jobs = [(lay, s) for s in args.seeds for lay in LAYERS if (str(lay), str(s)) not in done]
    lock = threading.Lock()  # --jobs N: one writer of the CSVs at a time

    def job(j):
        row, run_curves = one_run(args, *j)
        with lock:  # written after every run: an interrupted study keeps what it ran
            rows.append(row)
            rows.sort(key=lambda r: (-int(r["layers"]), int(r["seed"])))
            curves.extend(run_curves)
            curves.sort(key=lambda r: (-int(r["layers"]), int(r["seed"]), int(r["step"])))
            drop_steps(rows, curves, args.vocab)
            write_table(curves_path, CURVE_FIELDS, curves)
            write_table(path, FIELDS, rows)
        print(f"layers {j[0]} seed {j[1]}: loss drop at {row['loss_drop_step'] or '-'}, score jump at "
              f"{row['score_jump_step'] or '-'} ({row['cpu_seconds']} CPU-s)", flush=True)
    run_pool(job, jobs, args.jobs, WHO)


def coarse_steps(row, curves, every):
    """(loss drop, score jump) of a two-layer row as evaluations every `every` steps would find them: the same
    thresholds over the points of its curves at multiples of `every`."""
    mine = [c for c in curves if c["layers"] == row["layers"] and c["seed"] == row["seed"] and int(c["step"]) % every == 0]
    loss = [(int(c["step"]), float(c["in_context_loss"])) for c in mine if c["in_context_loss"]]
    prefix = [(int(c["step"]), float(c["best_prefix"])) for c in mine]
    threshold = float(row["drop_threshold"]) if row["drop_threshold"] else -math.inf
    return first_step(loss, lambda v: v < threshold), first_step(prefix, lambda v: v > 0.5)


def number(v, fmt="{:g}"):
    return fmt.format(float(v)) if v not in ("", None) else "never"


def runs_table(rows, curves):
    lines = ["| layers | seed | loss drop (step) | score jump (step) | apart (steps) | "
             f"at {COARSE}-step evaluations: drop, jump | induction head: prefix score | "
             "final in-context loss (nats) | late-token accuracy |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, b = r["loss_drop_step"], r["score_jump_step"]
        apart = f"{abs(int(a) - int(b))}" if a and b else "-"
        ca, cb = coarse_steps(r, curves, COARSE) if int(r["layers"]) > 1 else (None, None)
        lines.append(f"| {r['layers']} | {r['seed']} | {number(a)} | {number(b)} | {apart} | {number(ca)}, {number(cb)} | "
                     f"{r['induction_head']}: {r['prefix_score']} | {r['final_in_context_loss']} | "
                     f"{float(r['final_late_acc']):.1%} |")
    return "\n".join(lines)


def ablation_table(rows):
    lines = ["| seed | intact | without the best induction head | without every head above 0.5 | "
             "without the best previous-token head |", "|---|---|---|---|---|"]
    for r in rows:
        if r["late_acc_intact"]:
            lines.append(f"| {r['seed']} | {float(r['late_acc_intact']):.1%} | {r['induction_head']}: "
                         f"{float(r['late_acc_without_induction_head']):.1%} | {r['induction_heads']}: "
                         f"{float(r['late_acc_without_induction_heads']):.1%} | {r['previous_head']}: "
                         f"{float(r['late_acc_without_previous_head']):.1%} |")
    return "\n".join(lines)


def write_page(docs, rows, curves):
    page = os.path.join(docs, "studies", "induction_heads.md")
    os.makedirs(os.path.dirname(page), exist_ok=True)
    text = open(page).read() if os.path.exists(page) else "# Induction heads\n"
    cpu = sum(float(r["cpu_seconds"]) for r in rows)
    text = replace_block(text, "runs", runs_table(rows, curves) + f"\n\nRan {provenance(rows)}; {cpu:,.0f} CPU-seconds in all.")
    text = replace_block(text, "ablation", ablation_table(rows))
    with open(page, "w") as f:
        f.write(text)


def plot(docs, rows, curves, vocab):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from attnlab_runs.figures import save_figure
    os.makedirs(os.path.join(docs, "figures"), exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")
    for r in rows:
        lay, seed = int(r["layers"]), int(r["seed"])
        pts = [c for c in curves if int(c["layers"]) == lay and int(c["seed"]) == seed]
        colour = colours[seed % len(colours)] if lay > 1 else "0.6"
        style = "-" if lay > 1 else "--"
        label = f"{lay} layer{'s' if lay > 1 else ''}, seed {seed}"
        axes[0].plot([int(c["step"]) for c in pts if c["in_context_loss"]],
                     [float(c["in_context_loss"]) for c in pts if c["in_context_loss"]], style, color=colour, label=label)
        axes[1].plot([int(c["step"]) for c in pts], [float(c["best_prefix"]) for c in pts], style, color=colour,
                     label=label)
        for ax, key in ((axes[0], "loss_drop_step"), (axes[1], "score_jump_step")):
            if r[key] and lay > 1:
                ax.axvline(int(r[key]), color=colour, ls=":", lw=1)
        if r["drop_threshold"]:
            axes[0].axhline(float(r["drop_threshold"]), color=colour, lw=0.5, ls="--")
    axes[0].axhline(-math.log(vocab), color="k", lw=0.5, ls=":")
    axes[1].axhline(0.5, color="k", lw=0.5, ls=":")
    axes[0].set_title("held-out in-context loss (repeat less first copy)", fontsize=9)
    axes[1].set_title("best last-layer head's prefix-matching score", fontsize=9)
    axes[0].set_ylabel("nats")
    axes[1].set_ylabel("attention on the token after the earlier copy")
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    save_figure(fig, os.path.join(docs, "figures", "induction_heads.png"),
                title="Attention-only models on repeated random sequences (dotted: each seed's step)")
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="seed 0, 400 steps of a width-16 model on short windows")
    p.add_argument("--figures-only", action="store_true", help="the figure and tables from the CSVs; run nothing")
    add_places(p, "induction_heads")
    args = p.parse_args()
    args.vocab, args.min_len, args.max_len, args.model = VOCAB, MIN_LEN, MAX_LEN, MODEL
    args.steps, args.every, args.heldout, args.lr = STEPS, EVERY, HELDOUT, LR
    if args.tiny:
        args.seeds, args.vocab, args.min_len, args.max_len = [0], 8, 3, 5
        args.model = ["--model", "decoder", "--attention-only", "--d-model", "16", "--heads", "2"]
        args.steps, args.every, args.heldout, args.lr = 400, 20, 20, 1e-2
    if args.jobs < 1:
        sys.exit(f"{WHO}: --jobs must be >= 1")
    if not args.figures_only:
        if not os.access(args.attnlab, os.X_OK):
            sys.exit(f"{WHO}: no attnlab binary at {args.attnlab}; build it or pass --attnlab")
        os.makedirs(args.runs, exist_ok=True)
        os.makedirs(args.docs, exist_ok=True)
        measure(args)
    rows = read_rows(os.path.join(args.docs, "induction_heads.csv"), WHO)
    curves = read_csv(os.path.join(args.docs, "induction_heads_curves.csv"), missing_ok=True)
    two = [r for r in rows if int(r["layers"]) > 1]
    apart = [abs(int(r["loss_drop_step"]) - int(r["score_jump_step"])) for r in two
             if r["loss_drop_step"] and r["score_jump_step"]]
    coarse = [coarse_steps(r, curves, COARSE) for r in two]
    together = sum(1 for a, b in coarse if a and b and abs(a - b) <= COARSE)
    print(f"{len(two)} two-layer runs: loss drop and score jump {median(apart) if apart else '-'} steps apart "
          f"(median), within one {COARSE}-step evaluation in {together}; one-layer runs whose loss dropped: "
          f"{sum(1 for r in rows if int(r['layers']) == 1 and r['loss_drop_step'])}")
    write_page(args.docs, rows, curves)
    plot(args.docs, rows, curves, args.vocab)


if __name__ == "__main__":
    main()
