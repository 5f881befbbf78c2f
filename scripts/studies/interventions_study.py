#!/usr/bin/env python3
"""The worked study of docs/interventions.md: three trained runs asked why they answer as they do.

  - reverse, encoder: which heads carry the anti-diagonal? `attnlab ablate` (zero and mean) and
    `attnlab patch --corrupt-token 2` (where the changed symbol's information goes);
  - sort, decoder: from which layer on is each answer token decided? `attnlab lens` over held-out inputs;
  - induction, decoder: which head copies the token after the cue? ablation, and patching with the
    symbol after the cue's first occurrence changed (--corrupt-token 3 on inputs where that is so).

    /usr/bin/python3 scripts/studies/interventions_study.py               # train (or reuse) and measure, seeds 0 1 2
    /usr/bin/python3 scripts/studies/interventions_study.py --figures-only # tables and figures from the CSVs
    /usr/bin/python3 scripts/studies/interventions_study.py --tiny --runs /tmp/r --docs /tmp/d  # a smoke run

Runs go under runs/interventions/ and are kept (a run with a summary.json is not trained again). Writes
docs/interventions_ablation.csv, docs/interventions_patching.csv, docs/interventions_lens.csv and
docs/interventions_attribution.csv (one row per seed and component / point and position / layer and answer
token / component), the figures
docs/figures/interventions_{ablation,patching,lens}.png (seed 0), and the tables of docs/interventions.md
between its `<!-- BEGIN name -->` / `<!-- END name -->` markers. One thread per command.
"""
import argparse
import datetime
import json
import os
import sys

from attnlab_runs.files import read_summary, write_table
from attnlab_runs.launch import ROOT, checked_child, train
from attnlab_runs.study import add_places, cpu_kind, read_rows, replace_block

WIDE = ["--d-model", "64", "--heads", "4", "--d-ff", "256", "--lr", "1e-3", "--eval-every", "200",
        "--target", "0.99", "--threads", "1"]
# name -> (train flags, corrupted input position)
STUDIES = {
    "reverse-encoder": (["--task", "reverse", "--vocab", "10", "--min-len", "8", "--max-len", "8", "--layers", "2",
                         "--steps", "3000"] + WIDE, 2),
    "sort-decoder": (["--task", "sort", "--vocab", "10", "--min-len", "8", "--max-len", "8", "--model", "decoder",
                      "--layers", "3", "--steps", "4000"] + WIDE, 2),
    "induction-decoder": (["--task", "induction", "--vocab", "16", "--min-len", "8", "--max-len", "12",
                           "--model", "decoder", "--layers", "2", "--batch-size", "64", "--steps", "4000"] + WIDE, 3),
}
TINY = ["--steps", "30", "--eval-every", "30", "--target", "0", "--d-model", "16", "--heads", "2", "--d-ff", "32"]
HELDOUT = 200     # examples each ablation and patching averages over
LENS_INPUTS = 20  # held-out inputs the lens reads (sort)
ABLATION_FIELDS = ["study", "seed", "mode", "component", "kind", "exact_match", "delta_exact_match", "delta_loss",
                   "date", "cpu"]
PATCHING_FIELDS = ["study", "seed", "corrupt_token", "pairs", "target", "name", "position", "restored", "date", "cpu"]
LENS_FIELDS = ["study", "seed", "point", "answer_token", "top1_right", "mean_p_right", "inputs", "date", "cpu"]
ATTRIBUTION_FIELDS = ["study", "seed", "component", "mean_logit", "answer_tokens", "date", "cpu"]
PARTS = {"ablation": ABLATION_FIELDS, "patching": PATCHING_FIELDS, "lens": LENS_FIELDS, "attribution": ATTRIBUTION_FIELDS}


def ask(exe, args):
    return json.loads(checked_child([exe] + args + ["--json"])[0])


def overridden(flags, changes):
    """flags (pairs of flag and value) with the values of `changes` in place of theirs."""
    new = dict(zip(changes[::2], changes[1::2]))
    out = []
    for flag, value in zip(flags[::2], flags[1::2]):
        out += [flag, new.pop(flag, value)]
    return out + [x for kv in new.items() for x in kv]


def trained(exe, runs, name, seed, tiny):
    flags, _ = STUDIES[name]
    run = os.path.join(runs, f"{name}-s{seed}")
    if read_summary(run) is None:
        train(exe, run, overridden(flags, (TINY if tiny else []) + ["--seed", str(seed)]))
    return run


def block_heads(exe, run):
    """Each block's heads as one --what list (the model's components, from ablate --json on two examples)."""
    names = [r["component"] for r in ask(exe, ["ablate", "--run", run, "--heldout", "2"])["rows"] if r["kind"] == "head"]
    blocks = {}
    for n in names:
        blocks.setdefault(n.split(".attn.")[0], []).append(n)
    return [",".join(sorted(v)) for _, v in sorted(blocks.items())]


def ablation_rows(exe, run, name, seed, stamp):
    """Each component knocked out alone (zero, mean), then each block's heads together (zero)."""
    rows = []
    together = [("zero", ["--together", "--what", heads]) for heads in block_heads(exe, run)]
    runs = [("zero", []), ("mean", [])] + together
    for mode, extra in runs:
        out = ask(exe, ["ablate", "--run", run, "--mode", mode, "--heldout", str(HELDOUT)] + extra)
        for r in out["rows"]:
            rows.append({"study": name, "seed": seed, "mode": mode, "component": r["component"], "kind": r["kind"],
                         "exact_match": r["exact_match"], "delta_exact_match": r["delta_exact_match"],
                         "delta_loss": r["delta_loss"], **stamp})
    return rows


def patching_rows(exe, run, name, seed, stamp):
    k = STUDIES[name][1]
    out = ask(exe, ["patch", "--run", run, "--corrupt-token", str(k), "--heldout", str(HELDOUT)])
    base = {"study": name, "seed": seed, "corrupt_token": k, "pairs": out["pairs"], **stamp}
    rows = [dict(base, target="head", name=h["name"], position="all", restored=h["value"]) for h in out["total"]["heads"]]
    for line in out["total"]["residual"]:
        rows += [dict(base, target="residual", name=line["point"], position=p, restored=v)
                 for p, v in enumerate(line["values"])]
    return rows


def heldout_inputs(exe, run, n):
    out = json.loads(checked_child([exe, "eval", "--run", run, "--heldout", str(n), "--examples", str(n), "--json"])[0])
    return [e["input"] for e in out["examples"]]


def lens_rows(exe, run, name, seed, stamp):
    """Per layer and answer token: the fraction of inputs whose lens has the right token on top there."""
    tally = {}
    inputs = heldout_inputs(exe, run, LENS_INPUTS)
    for text in inputs:
        out = ask(exe, ["lens", "--run", run, text])
        for point, cells in zip(out["points"], out["lens"]):
            for i, c in enumerate(c for c in cells if c["rank"] is not None):  # the answer positions
                t = tally.setdefault((point, i), [0, 0.0])
                t[0] += c["rank"] == 1
                t[1] += c["p_answer"]
    return [{"study": name, "seed": seed, "point": point, "answer_token": i, "top1_right": top / len(inputs),
             "mean_p_right": p / len(inputs), "inputs": len(inputs), **stamp} for (point, i), (top, p) in tally.items()]


def attribution_rows(exe, run, name, seed, stamp):
    """Per component: its direct logit attribution to the right answer, averaged over the answer tokens
    (<eos> left out) of held-out inputs."""
    total, count = {}, 0
    for text in heldout_inputs(exe, run, LENS_INPUTS):
        for position in ask(exe, ["lens", "--run", run, text])["attribution"]:
            if position["answer"] == "<eos>":
                continue
            count += 1
            for part in position["parts"]:
                total[part["component"]] = total.get(part["component"], 0.0) + part["logit"]
    return [{"study": name, "seed": seed, "component": c, "mean_logit": v / count, "answer_tokens": count, **stamp}
            for c, v in total.items()]


def measure(args):
    stamp = {"date": datetime.date.today().isoformat(), "cpu": cpu_kind()}
    found = {"ablation": [], "patching": [], "lens": [], "attribution": []}
    for seed in args.seeds:
        for name in STUDIES:
            run = trained(args.attnlab, args.runs, name, seed, args.tiny)
            found["ablation"] += ablation_rows(args.attnlab, run, name, seed, stamp)
            if name != "sort-decoder":
                found["patching"] += patching_rows(args.attnlab, run, name, seed, stamp)
            else:
                found["lens"] += lens_rows(args.attnlab, run, name, seed, stamp)
            if name == "induction-decoder":
                found["attribution"] += attribution_rows(args.attnlab, run, name, seed, stamp)
    for part, fields in PARTS.items():
        write_table(os.path.join(args.docs, f"interventions_{part}.csv"), fields, found[part])


def top_components(rows, name, seed, mode, k=3):
    mine = [r for r in rows if r["study"] == name and int(r["seed"]) == seed and r["mode"] == mode
            and r["kind"] in ("head", "mlp")]
    mine.sort(key=lambda r: (float(r["delta_exact_match"]), -float(r["delta_loss"])))
    return ", ".join(f"{r['component']} ({100 * float(r['delta_exact_match']):+.1f})" for r in mine[:k])


def ablation_table(rows):
    lines = ["| run | seed | zero-ablation: largest drops in exact match (points) | mean-ablation |", "|---|---|---|---|"]
    for name in STUDIES:
        for seed in sorted({int(r["seed"]) for r in rows if r["study"] == name}):
            lines.append(f"| {name} | {seed} | {top_components(rows, name, seed, 'zero')} | "
                         f"{top_components(rows, name, seed, 'mean')} |")
    return "\n".join(lines)


def together_table(rows):
    """Per run and seed: each block's heads knocked out together, against the largest single head's effect."""
    lines = ["| run | seed | all heads of a block zeroed together (change in exact match, points) | "
             "the largest single head's |", "|---|---|---|---|"]
    for name in STUDIES:
        for seed in sorted({int(r["seed"]) for r in rows if r["study"] == name}):
            mine = [r for r in rows if r["study"] == name and int(r["seed"]) == seed and r["mode"] == "zero"]
            groups = [f"{r['component'].split('.attn.')[0]}: {100 * float(r['delta_exact_match']):+.1f}"
                      for r in mine if r["kind"] == "group"]
            single = min(float(r["delta_exact_match"]) for r in mine if r["kind"] == "head")
            lines.append(f"| {name} | {seed} | {'; '.join(groups)} | {100 * single:+.1f} |")
    return "\n".join(lines)


def patching_table(rows):
    lines = ["| run | seed | pairs | heads restoring most (fraction) | residual: where the information sits |",
             "|---|---|---|---|---|"]
    for name in STUDIES:
        for seed in sorted({int(r["seed"]) for r in rows if r["study"] == name}):
            mine = [r for r in rows if r["study"] == name and int(r["seed"]) == seed]
            heads = sorted((r for r in mine if r["target"] == "head"), key=lambda r: -float(r["restored"]))[:2]
            places = []
            for point in dict.fromkeys(r["name"] for r in mine if r["target"] == "residual"):
                best = max((r for r in mine if r["name"] == point), key=lambda r: float(r["restored"]))
                places.append(f"{point} @{best['position']} ({float(best['restored']):.2f})")
            lines.append(f"| {name} | {seed} | {mine[0]['pairs']} | "
                         + ", ".join(f"{h['name']} ({float(h['restored']):.2f})" for h in heads)
                         + " | " + "; ".join(places) + " |")
    return "\n".join(lines)


def lens_table(rows):
    points = list(dict.fromkeys(r["point"] for r in rows))
    tokens = sorted({int(r["answer_token"]) for r in rows})
    lines = ["| layer | " + " | ".join(f"answer {t}" for t in tokens) + " |", "|---|" + "---|" * len(tokens)]
    for point in points:
        cells = []
        for t in tokens:
            mine = [float(r["top1_right"]) for r in rows if r["point"] == point and int(r["answer_token"]) == t]
            cells.append(f"{100 * sum(mine) / len(mine):.0f}%")
        lines.append(f"| {point} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def induction_table(parts):
    """Per seed, the heads of the induction decoder's last block that each method ranks first."""
    lines = ["| seed | ablation (zero): block 1's largest drop | patching: most restored | attribution: largest mean logit |",
             "|---|---|---|---|"]
    last = "blocks.1.attn."
    for seed in sorted({int(r["seed"]) for r in parts["attribution"]}):
        def mine(part, **match):
            return [r for r in parts[part] if r["study"] == "induction-decoder" and int(r["seed"]) == seed
                    and r.get("component", r.get("name", "")).startswith(last)
                    and all(r[k] == v for k, v in match.items())]
        abl = min(mine("ablation", mode="zero"), key=lambda r: float(r["delta_exact_match"]))
        pat = max(mine("patching", target="head"), key=lambda r: float(r["restored"]))
        dla = max(mine("attribution"), key=lambda r: float(r["mean_logit"]))
        lines.append(f"| {seed} | {abl['component']} ({100 * float(abl['delta_exact_match']):+.1f}) | "
                     f"{pat['name']} ({float(pat['restored']):.2f}) | {dla['component']} ({float(dla['mean_logit']):.2f}) |")
    return "\n".join(lines)


def write_tables(docs):
    parts = {p: read_rows(os.path.join(docs, f"interventions_{p}.csv"), "interventions_study")
             for p in PARTS}
    page = os.path.join(docs, "interventions.md")
    text = open(page).read() if os.path.exists(page) else ""
    text = replace_block(text, "ablation", ablation_table(parts["ablation"]))
    text = replace_block(text, "together", together_table(parts["ablation"]))
    text = replace_block(text, "patching", patching_table(parts["patching"]))
    text = replace_block(text, "lens", lens_table(parts["lens"]))
    text = replace_block(text, "induction", induction_table(parts))
    with open(page, "w") as f:
        f.write(text)
    return parts


def plot(docs, parts):
    import matplotlib
    matplotlib.use("Agg")
    from interventions_figures import plot_ablation, plot_lens, plot_patching
    os.makedirs(os.path.join(docs, "figures"), exist_ok=True)
    plot_ablation(parts["ablation"], list(STUDIES), os.path.join(docs, "figures", "interventions_ablation.png"))
    plot_patching(parts["patching"], os.path.join(docs, "figures", "interventions_patching.png"))
    plot_lens(parts["lens"], os.path.join(docs, "figures", "interventions_lens.png"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", default=os.path.join(ROOT, "build", "attnlab"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--tiny", action="store_true", help="seed 0, 30 steps of small models: a smoke run")
    p.add_argument("--figures-only", action="store_true", help="tables and figures from the CSVs; run nothing")
    add_places(p, "interventions")
    args = p.parse_args()
    if args.tiny:
        args.seeds = [0]
    if not args.figures_only:
        if not os.access(args.attnlab, os.X_OK):
            sys.exit(f"interventions_study: no attnlab binary at {args.attnlab}; build it or pass --attnlab")
        os.makedirs(args.runs, exist_ok=True)
        os.makedirs(args.docs, exist_ok=True)
        measure(args)
    plot(args.docs, write_tables(args.docs))


if __name__ == "__main__":
    main()
