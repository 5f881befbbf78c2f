#!/usr/bin/env python3
"""The study scripts run end to end on a tiny configuration (a ctest test).

  - scripts/studies/gradient_flow_study.py --tiny: every run of its three parts, its three CSVs (one row
    per (arch, norm, depth, block, parameter) at initialisation, with the head; one per warm-up run, its
    max grad norm the per-step maximum of the run's metrics.csv; one per sharpness probe and operator,
    lambda_max * lr as the run's probe_sharpness.csv has it), its four figures and the page's two tables;
    --figures-only redraws them from the CSVs alone;
  - scripts/studies/learning_speed_study.py --tables-only: the table of docs/learning_speed.csv, with its
    layout column, rebuilt into a copy of experiments.md; on hand-made rows, each median with its seed
    range (steps to 100%, to 99%, first at 50%) and each row's date and CPU, and a row that does not say
    where it ran refused; the two implementations of each setting given the same data files
    (adder-mingpt: the same held-out file);
  - scripts/studies/experiments.py --tables-only on hand-made rows: median (range) and the runs' date and CPU;
  - scripts/studies/interventions_study.py --tiny: its three CSVs against attnlab ablate's and patch's own
    figures, its tables and figures; --figures-only redraws them from the CSVs alone;
  - scripts/studies/critical_batch_size_study.py --tiny: a row per (batch, lr) run whose steps to each target
    and B_simple there are recounted from the run's own metrics.csv, the fit's tables, the figure;
    --figures-only redraws them from the CSV alone;
  - scripts/studies/edge_of_stability_study.py --tiny: one full-batch run per optimizer; its probe rows are
    the runs' probe_sharpness.csv, its loss rows their metrics.csv, each run's rises after the sharpness
    first reached 90% of the threshold recounted from them; the table lands between its markers, and
    --figures-only redraws the figure from the CSVs alone;
  - scripts/studies/induction_heads_study.py --tiny: a row per run (two layers and one) whose loss-drop (against
    the control's final in-context loss) and score-jump steps are recounted from the run's metrics.csv and
    probe_induction.csv, its ablation
    figures those of attnlab ablate; tables between markers, --figures-only redraws;
  - scripts/studies/grokking_study.py --tiny: a row per run whose memorised and grokked steps and key
    frequencies are recounted from the run's metrics.csv and embedding_fourier.csv; tables between markers,
    --figures-only redraws.

    test_study_scripts.py --attnlab BUILD/attnlab
Exit 0: passed; 1: failed; 77: matplotlib cannot be imported (ctest: skipped).
"""
import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILURES = []


def expect(ok, what):
    if not ok:
        FAILURES.append(what)
        print(f"FAILED: {what}", file=sys.stderr)


def run(args):
    r = subprocess.run([sys.executable] + args, capture_output=True, text=True)
    expect(r.returncode == 0, f"{' '.join(args)} exits 0 (got {r.returncode}: {r.stderr.strip()[-500:]})")
    return r.stdout


def test_gradient_flow(exe, work):
    out, runs = os.path.join(work, "docs"), os.path.join(work, "runs")
    os.makedirs(out)
    shutil.copy(os.path.join(ROOT, "docs", "gradient_flow.md"), out)
    script = os.path.join(ROOT, "scripts", "studies", "gradient_flow_study.py")
    printed = run([script, "--tiny", "--attnlab", exe, "--out", out, "--runs", runs])
    with open(os.path.join(out, "gradient_flow_init.csv")) as f:
        init = list(csv.DictReader(f))
    # 2 archs x 2 norms x depths 1, 2 -> 3 blocks each of 5 parameters, and a head per depth.
    expect(len(init) == 4 * (3 * 5 + 2), f"init rows: one per arch, norm, depth, block, parameter (got {len(init)})")
    expect(all(float(r["grad_norm"]) > 0 for r in init), "every gradient norm at initialisation is positive")
    heads = {(r["arch"], r["norm"], r["layers"]) for r in init if r["param"] == "head.weight"}
    expect(len(heads) == 8, f"a head row per arch, norm and depth (got {sorted(heads)})")
    expect("slope of log |grad| on log L" in printed, "the slopes are printed")
    check_gradient_flow_training(out, runs)
    figures = ["gradient_flow_layers.png", "gradient_flow_depth.png", "gradient_flow_warmup.png",
               "gradient_flow_sharpness.png"]
    for name in figures:
        path = os.path.join(out, "figures", name)
        expect(os.path.exists(path) and os.path.getsize(path) > 1000, f"{name} written")
        os.remove(path)
    page = os.path.join(out, "gradient_flow.md")
    with open(page) as f:
        tables = f.read()
    with open(page, "w") as f:
        f.write(tables.replace("| 2 | 0.002 | 0 | pre |", "| stale |"))
    shutil.rmtree(runs)
    run([script, "--figures-only", "--out", out, "--runs", runs])
    expect(all(os.path.exists(os.path.join(out, "figures", n)) for n in figures), "--figures-only redraws every figure")
    with open(page) as f:
        expect(f.read() == tables, "--figures-only rewrites the page's tables from the CSVs")
    expect(not os.path.exists(runs), "--figures-only runs nothing")


def check_gradient_flow_training(out, runs):
    """The tiny warm-up and sharpness rows against the runs' own metrics.csv and probe_sharpness.csv."""
    with open(os.path.join(out, "gradient_flow_warmup.csv")) as f:
        warm = list(csv.DictReader(f))
    expect(len(warm) == 4, f"warm-up rows: 2 norms x with and without warm-up (got {len(warm)})")
    for r in warm:
        expect(r["diverged"] in ("0", "1") and r["date"] and r["cpu"] and float(r["cpu_seconds"]) > 0,
               f"warm-up row filled with its date, CPU and CPU-seconds: {r}")
        run_dir = os.path.join(runs, f"warm-L{r['layers']}-{r['norm']}-lr{r['lr']}-w{r['warmup']}-s{r['seed']}")
        with open(os.path.join(run_dir, "metrics.csv")) as f:
            metrics = [m for m in csv.DictReader(f) if int(m["step"]) <= 100 and m["grad_norm"]]
        expect(len(metrics) == 100, f"{run_dir}: a metrics row per step (got {len(metrics)})")
        top = max(float(m["grad_norm"]) for m in metrics)
        expect(abs(float(r["max_grad_norm_first_100"]) - top) <= 1e-3 * top,
               f"{run_dir}: the row's max grad norm is the per-step maximum {top}")
    with open(os.path.join(out, "gradient_flow_sharpness.csv")) as f:
        sharp = list(csv.DictReader(f))
    # 2 norms x warm-up 0 and 20, probes at steps 1, 2 and 4, two operators (AdamW) each.
    expect(len(sharp) == 2 * 2 * 3 * 2, f"sharpness rows: norm, warm-up, step, operator (got {len(sharp)})")
    for r in sharp:
        run_dir = os.path.join(runs, f"sharp-L{r['layers']}-{r['norm']}-lr{r['lr']}-w{r['warmup']}-s{r['seed']}")
        with open(os.path.join(run_dir, "probe_sharpness.csv")) as f:
            probe = next(p for p in csv.DictReader(f) if (p["step"], p["operator"]) == (r["step"], r["operator"]))
        want = float(probe["lambda_max"]) * float(probe["lr"])
        expect(abs(float(r["lambda_eta"]) - want) <= 1e-3 * abs(want), f"{run_dir} step {r['step']}: lambda_max * lr")
        expect(float(r["limit"]) == (2.0 if r["operator"] == "hessian" else 38.0), f"{run_dir}: the limit")
    for norm in ("pre", "post"):
        ramp = [float(r["step_lr"]) for r in sharp if (r["warmup"], r["operator"], r["norm"]) == ("20", "hessian", norm)]
        expect(sorted(ramp) == ramp and ramp[0] < 0.002 * 0.1, f"the {norm} warm-up run probes a rising lr ({ramp})")


def test_learning_speed_tables(work):
    docs = os.path.join(work, "ls-docs")
    os.makedirs(docs)
    for name in ("learning_speed.csv", "experiments.md"):
        shutil.copy(os.path.join(ROOT, "docs", name), docs)
    run([os.path.join(ROOT, "scripts", "studies", "learning_speed_study.py"), "--tables-only", "--docs", docs])
    with open(os.path.join(docs, "experiments.md")) as f:
        text = f.read()
    expect("| setting | implementation | init | layout |" in text, "the learning-speed table has a layout column")
    with open(os.path.join(docs, "learning_speed.csv")) as f:
        rows = list(csv.DictReader(f))
    expect(rows and all(r["layout"] in ("special", "bare") for r in rows), "every CSV row names its layout")


def test_learning_speed_same_data():
    """Every setting gives attnlab and the reference the same --file and --heldout-file; adder-mingpt's is
    minGPT's test split, and no implementation there draws a held-out set of its own."""
    import learning_speed_study as L

    def value(flags, name):
        return flags[flags.index(name) + 1] if name in flags else None

    for setting in L.SETTINGS:
        ours, theirs = L.task_flags_for(setting, "attnlab"), L.task_flags_for(setting, "pytorch")
        for name in ("--task", "--file", "--heldout-file"):
            expect(value(ours, name) == value(theirs, name), f"{setting[0]}: the same {name} for both implementations")
    fixed = next(s for s in L.SETTINGS if s[0] == "adder-mingpt")
    for impl in ("attnlab", "pytorch"):
        flags = L.task_flags_for(fixed, impl)
        expect(value(flags, "--heldout-file") == os.path.join("data", "pairs", "adder2_heldout.tsv")
               and "--heldout" not in flags and "--heldout-fraction" not in flags,
               f"adder-mingpt: {impl} evaluates on minGPT's held-out file only ({flags})")


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_learning_speed_summary(work):
    """Hand-made rows: the table's median (range) and each row's date and CPU; a row that does not say
    where it ran is refused in one line, the files left as they were."""
    docs = os.path.join(work, "ls-made")
    os.makedirs(docs)
    script = os.path.join(ROOT, "scripts", "studies", "learning_speed_study.py")
    with open(os.path.join(ROOT, "docs", "learning_speed.csv")) as f:
        fields = next(csv.reader(f))
    base = dict.fromkeys(fields, "") | {"setting": "adder", "implementation": "attnlab", "init": "gpt2",
                                        "parameters": "89342", "eval_every": "100", "patience": "3", "steps": "1",
                                        "heldout_exact": "1", "seconds": "1", "cpu_seconds": "1", "evals": "[]"}
    rows = [base | {"variant": "attnlab-gpt2-bare", "layout": "bare", "seed": str(seed), "steps_to_100": s100,
                    "steps_to_99": s99, "date": "2026-12-04", "cpu": "Test CPU, family 99", "evals": evals}
            for seed, s100, s99, evals in ((0, "4200", "900", "[[100, 0.1], [200, 0.5], [300, 0.4]]"),
                                           (1, "2000", "2000", "[[100, 0.49], [200, 0.3], [300, 0.7]]"),
                                           (2, "2600", "1200", "[[100, 0.6]]"))]
    rows += [base | {"variant": "attnlab-gpt2", "layout": "special", "seed": str(seed), "steps_to_100": s100,
                     "steps_to_99": "300", "date": "2026-12-01", "cpu": "Other CPU, family 7"}
             for seed, s100 in ((0, "250"), (1, ""), (2, "150"))]
    write_csv(os.path.join(docs, "learning_speed.csv"), rows)
    with open(os.path.join(docs, "experiments.md"), "w") as f:
        f.write("<!-- BEGIN learning-speed -->\n<!-- END learning-speed -->\n")
    run([script, "--tables-only", "--docs", docs])
    with open(os.path.join(docs, "experiments.md")) as f:
        lines = f.read().splitlines()
    bare = [ln for ln in lines if "| bare |" in ln]
    special = [ln for ln in lines if "| special |" in ln]
    expect(len(bare) == 1 and "| 2600 (2000–4200) |" in bare[0] and "| 1200 (900–2000) |" in bare[0]
           and "| 1200 (900–2000) | 200 (100–300) |" in bare[0] and bare[0].endswith("| 2026-12-04 on Test CPU, family 99 |"),
           f"the bare row has its medians, ranges (first at 50% the first evaluation at or above it), date and CPU: {bare}")
    expect(len(special) == 1 and "| 250 (150 to > 10000) |" in special[0]
           and "| 300 (all 3 seeds) | > 10000 (all 3 seeds) |" in special[0]
           and special[0].endswith("| 2026-12-01 on Other CPU, family 7 |"),
           f"a seed not by the cap counts beyond it, equal seeds say so: {special}")
    rows[4]["cpu"] = ""
    write_csv(os.path.join(docs, "learning_speed.csv"), rows)
    before = open(os.path.join(docs, "experiments.md")).read()
    r = subprocess.run([sys.executable, script, "--tables-only", "--docs", docs], capture_output=True, text=True)
    expect(r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
           and "attnlab-gpt2 seed 1 has no date or cpu" in r.stderr,
           f"a row without its CPU is refused in one line naming it (got {r.returncode}: {r.stderr.strip()})")
    expect(open(os.path.join(docs, "experiments.md")).read() == before, "a refused CSV leaves the table as it was")


def test_experiments_tables(work):
    """scripts/studies/experiments.py --tables-only on hand-made rows: the task table's median (range) and the
    block's stamp naming where the runs ran."""
    docs = os.path.join(work, "ex-made")
    os.makedirs(docs)
    with open(os.path.join(ROOT, "docs", "experiments.csv")) as f:
        fields = next(csv.reader(f))
    base = dict.fromkeys(fields, "") | {"part": "tasks", "experiment": "copy-encoder", "implementation": "attnlab",
                                        "task": "copy", "model": "encoder", "parameters": "102676", "target": "0.99",
                                        "steps": "1000", "heldout_exact": "1", "seconds": "1", "cpu_seconds": "1",
                                        "date": "2026-12-01", "cpu": "Test CPU, family 99"}
    write_csv(os.path.join(docs, "experiments.csv"),
              [base | {"seed": str(seed), "solved_at_step": s} for seed, s in ((0, "50"), (1, "100"), (2, ""))])
    with open(os.path.join(docs, "experiments.md"), "w") as f:
        f.write("<!-- BEGIN tasks -->\n<!-- END tasks -->\n")
    run([os.path.join(ROOT, "scripts", "studies", "experiments.py"), "--tables-only", "--docs", docs])
    text = open(os.path.join(docs, "experiments.md")).read()
    expect("from runs of 2026-12-01 on Test CPU, family 99._" in text, "the task table's stamp names date and CPU")
    expect("| 50, 100, not by 1000 | 100 (50 to > 1000) |" in text, "the task table has each seed, median and range")
    write_csv(os.path.join(docs, "experiments.csv"), [base | {"seed": "0", "solved_at_step": "50", "date": ""}])
    script = os.path.join(ROOT, "scripts", "studies", "experiments.py")
    r = subprocess.run([sys.executable, script, "--tables-only", "--docs", docs], capture_output=True, text=True)
    expect(r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
           and "copy-encoder attnlab seed 0 has no date or cpu" in r.stderr,
           f"experiments.py refuses a row without its date in one line (got {r.returncode}: {r.stderr.strip()})")
    expect(open(os.path.join(docs, "experiments.md")).read() == text, "a refused CSV leaves the tables as they were")


def expect_redrawn(script, docs, runs, figures):
    """Each figure drawn; then with the figures and the run directories gone, `script --figures-only` draws
    them again from the CSVs in docs and runs nothing."""
    for path in figures:
        expect(os.path.getsize(path) > 1000, f"{path} drawn")
        os.remove(path)
    shutil.rmtree(runs)
    run([script, "--figures-only", "--docs", docs, "--runs", runs])
    expect(all(os.path.exists(p) for p in figures) and not os.path.exists(runs), "--figures-only redraws, runs nothing")


def test_interventions(exe, work):
    """The interventions study end to end on tiny runs: its three CSVs hold what the commands print, the
    tables land between their markers, --figures-only redraws the figures from the CSVs alone."""
    docs, runs = os.path.join(work, "iv-docs"), os.path.join(work, "iv-runs")
    script = os.path.join(ROOT, "scripts", "studies", "interventions_study.py")
    run([script, "--tiny", "--attnlab", exe, "--docs", docs, "--runs", runs])

    def rows(part):
        with open(os.path.join(docs, f"interventions_{part}.csv")) as f:
            return list(csv.DictReader(f))
    ablation = rows("ablation")
    rev = [r for r in ablation if r["study"] == "reverse-encoder" and r["mode"] == "zero"]
    # 2 blocks x (2 heads + mlp + block) components, each once per mode; then each block's heads together.
    expect(len(rev) == 8 + 2 and len(ablation) == 2 * (8 + 3 * 4 + 8) + 2 + 3 + 2, f"ablation rows (got {len(ablation)})")
    together = {r["component"]: r for r in rev if r["kind"] == "group"}
    expect(set(together) == {"blocks.0.attn.h0 + blocks.0.attn.h1", "blocks.1.attn.h0 + blocks.1.attn.h1"},
           f"each block's heads together (got {sorted(together)})")
    rev = [r for r in rev if r["kind"] != "group"]
    printed = json.loads(subprocess.run([exe, "ablate", "--run", os.path.join(runs, "reverse-encoder-s0"), "--heldout", "200",
                                         "--json"], capture_output=True, text=True).stdout)
    expect({r["component"]: float(r["delta_exact_match"]) for r in rev}
           == {r["component"]: r["delta_exact_match"] for r in printed["rows"]}, "ablation rows = attnlab ablate --json")
    patching = rows("patching")
    expect({r["study"] for r in patching} == {"reverse-encoder", "induction-decoder"}, "patching on reverse and induction")
    expect(any(r["target"] == "residual" and r["name"] == "blocks.0.resid_pre" and r["position"] == "2"
               and abs(float(r["restored"]) - 1) < 1e-6 for r in patching),
           "the corrupted position of the first block's stream restores all of it")
    lens = rows("lens")
    last = [r for r in lens if r["point"] == "blocks.2.resid_post"]
    expect(len(last) == 9 and all(0 <= float(r["top1_right"]) <= 1 for r in last), "lens rows: 8 answers and <eos>")
    parts = [r["component"] for r in rows("attribution")]
    # the embedding, 2 blocks x (2 heads, the out_proj bias, the MLP), the constant
    expect(len(parts) == 1 + 2 * 4 + 1 and "blocks.1.attn.h1" in parts, f"attribution rows, one per part (got {parts})")
    with open(os.path.join(docs, "interventions.md")) as f:
        page = f.read()
    expect(all(f"<!-- BEGIN {n} -->" in page for n in ("ablation", "together", "patching", "lens", "induction")),
           "the five tables written")
    expect_redrawn(script, docs, runs,
                   [os.path.join(docs, "figures", f"interventions_{n}.png") for n in ("ablation", "patching", "lens")])


def steps_to(losses, batch, target):
    """The study's rule, written again: the first step where the mean of the last ceil(256/B) losses <= target."""
    w = -(-256 // batch)
    return next((i + 1 for i in range(w - 1, len(losses)) if sum(losses[i - w + 1:i + 1]) / w <= target), None)


def test_critical_batch_size(exe, work):
    """The critical-batch-size study on tiny runs: a row per run whose steps to each target and B_simple there are
    those of the run's own metrics.csv, the fit tables between their markers, the figure; --figures-only redraws."""
    docs, runs = os.path.join(work, "cbs-docs"), os.path.join(work, "cbs-runs")
    script = os.path.join(ROOT, "scripts", "studies", "critical_batch_size_study.py")
    printed = run([script, "--tiny", "--attnlab", exe, "--docs", docs, "--runs", runs])
    with open(os.path.join(docs, "critical_batch_size.csv")) as f:
        rows = list(csv.DictReader(f))
    expect(sorted((r["batch"], r["lr"]) for r in rows) == [(b, lr) for b in ("16", "32", "8") for lr in ("0.01", "0.03")],
           f"one row per batch (8, 16, 32) and learning rate (got {[(r['batch'], r['lr']) for r in rows]})")
    targets = [c[len("steps_to_"):] for c in rows[0] if c.startswith("steps_to_")] if rows else []
    expect(targets == ["2.2", "2", "1.8"], f"a steps_to column per tiny target (got {targets})")
    reached = 0
    for r in rows:
        with open(os.path.join(runs, f"B{r['batch']}-lr{r['lr']}-s0", "metrics.csv")) as f:
            metrics = list(csv.DictReader(f))
        expect(len(metrics) == int(r["steps_run"]) == 40 and float(r["cpu_seconds"]) > 0 and r["date"] and r["cpu"],
               f"B {r['batch']} lr {r['lr']}: 40 steps logged, CPU-seconds, date and cpu")
        for t in targets:
            s = steps_to([float(m["loss"]) for m in metrics], int(r["batch"]), float(t))
            expect(r[f"steps_to_{t}"] == (str(s) if s else ""), f"B {r['batch']} lr {r['lr']}: steps to {t} = {s}")
            if s:
                reached += 1
                expect(abs(float(r[f"bsimple_at_{t}"]) / float(metrics[s - 1]["noise_scale"]) - 1) < 1e-3,
                       f"B {r['batch']} lr {r['lr']}: B_simple at {t} is the run's noise_scale at step {s}")
    expect(reached >= 6, f"the tiny runs reach their targets (got {reached} of {len(rows) * 3})")
    expect("B_crit" in printed, "the fit is printed")
    with open(os.path.join(docs, "studies", "critical_batch_size.md")) as f:
        page = f.read()
    expect(all(f"<!-- BEGIN {n} -->" in page for n in ("runs", "fit", "cost")), "the three blocks written")
    expect_redrawn(script, docs, runs, [os.path.join(docs, "figures", "critical_batch_size.png")])


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_edge_of_stability(exe, work):
    """The edge-of-stability study end to end on tiny runs: what it wrote against the runs' own files."""
    docs, runs = os.path.join(work, "eos-docs"), os.path.join(work, "eos-runs")
    os.makedirs(os.path.join(docs, "studies"))
    page = os.path.join(docs, "studies", "edge_of_stability.md")
    with open(page, "w") as f:
        f.write("# page\n<!-- BEGIN edge-of-stability -->\nold\n<!-- END edge-of-stability -->\ntail\n")
    script = os.path.join(ROOT, "scripts", "studies", "edge_of_stability_study.py")
    run([script, "--tiny", "--attnlab", exe, "--docs", docs, "--runs", runs])
    probes = read_rows(os.path.join(docs, "edge_of_stability.csv"))
    losses = read_rows(os.path.join(docs, "edge_of_stability_loss.csv"))
    summaries = read_rows(os.path.join(docs, "edge_of_stability_runs.csv"))
    expect([(r["optimizer"], r["steps"]) for r in summaries] == [("gd", "12"), ("adam", "12")], "one 12-step run per optimizer")
    for opt, operator, name in (("gd", "hessian", "gd-lr0.5-s0"), ("adam", "preconditioned", "adam-lr0.003-s0")):
        own = read_rows(os.path.join(runs, name, "probe_sharpness.csv"))
        mine = [r for r in probes if r["optimizer"] == opt]
        expect([(r["step"], r["operator"]) for r in mine] == [(r["step"], r["operator"]) for r in own]
               and all(abs(float(a["lambda_max"]) / float(b["lambda_max"]) - 1) < 1e-5 for a, b in zip(mine, own)),
               f"{opt}: the probe rows are the run's probe_sharpness.csv")
        metrics = read_rows(os.path.join(runs, name, "metrics.csv"))
        curve = [float(r["loss"]) for r in losses if r["optimizer"] == opt]
        expect(len(curve) == 12 and all(abs(a / float(b["loss"]) - 1) < 1e-5 for a, b in zip(curve, metrics)),
               f"{opt}: the loss rows are the run's metrics.csv")
        mine = [r for r in own if r["operator"] == operator]
        high = [float(r["lambda_max"]) >= 0.9 * float(r["threshold"]) for r in mine]
        at = [int(r["step"]) for k, r in enumerate(mine) if k and high[k] and not high[k - 1]]  # rose to 90% from below
        tail = [float(r["loss"]) for r in metrics if at and int(r["step"]) > at[0]]
        rises = str(sum(b > a for a, b in zip(tail, tail[1:]))) if at else ""
        summary = next(r for r in summaries if r["optimizer"] == opt)
        expect(summary["rises"] == rises and summary["cpu"] and summary["date"], f"{opt}: rises {rises} (got {summary['rises']})")
        expect(opt != "gd" or int(rises) > 0, "the tiny gradient-descent run reaches 90% of 2/eta and its loss rises after")
    with open(page) as f:
        text = f.read()
    expect("\nold\n" not in text and "| gd | 0.5 | 4 |" in text and text.endswith("tail\n"), "the table between its markers")
    expect_redrawn(script, docs, runs, [os.path.join(docs, "figures", "edge_of_stability.png")])


def test_induction_heads(exe, work):
    """The induction-heads study on tiny runs: each row recounted from the run's own files and attnlab ablate."""
    docs, runs = os.path.join(work, "ih-docs"), os.path.join(work, "ih-runs")
    script = os.path.join(ROOT, "scripts", "studies", "induction_heads_study.py")
    run([script, "--tiny", "--attnlab", exe, "--docs", docs, "--runs", runs])
    rows = read_rows(os.path.join(docs, "induction_heads.csv"))
    curves = read_rows(os.path.join(docs, "induction_heads_curves.csv"))
    expect([(r["layers"], r["seed"]) for r in rows] == [("2", "0"), ("1", "0")], "a two-layer run and the control")
    control = [r for r in rows if r["layers"] == "1"]
    for r in rows:
        run_dir = os.path.join(runs, f"L{r['layers']}-s0")
        losses = [(int(m["step"]), float(m["in_context_loss"])) for m in read_rows(os.path.join(run_dir, "metrics.csv"))
                  if m["in_context_loss"]]
        expect(abs(float(r["final_in_context_loss"]) - losses[-1][1]) < 1e-3, f"L{r['layers']}: the final in-context loss")
        drop = None
        if r["layers"] == "2" and control:  # below the midpoint of the control's final value and -ln vocab
            threshold = (float(control[0]["final_in_context_loss"]) - math.log(8)) / 2
            drop = next((s for s, v in losses if v < threshold), None)
        expect(r["loss_drop_step"] == (str(drop) if drop else ""), f"L{r['layers']}: loss drop at {drop}")
        probe = read_rows(os.path.join(run_dir, "probe_induction.csv"))
        last_layer = f"blocks.{int(r['layers']) - 1}.attn"
        steps = sorted({int(p["step"]) for p in probe})
        best = [max(float(p["prefix_matching"]) for p in probe if int(p["step"]) == s and p["layer"] == last_layer)
                for s in steps]
        jump = next((s for s, v in zip(steps, best) if v > 0.5), None)
        expect(r["score_jump_step"] == (str(jump) if jump else ""), f"L{r['layers']}: score jump at {jump}")
        mine = [c for c in curves if c["layers"] == r["layers"]]
        close = all(abs(float(c["best_prefix"]) - v) < 1e-3 for c, v in zip(mine, best))
        expect([int(c["step"]) for c in mine] == steps and close,
               f"L{r['layers']}: the curve rows are the probe's best last-layer prefix score at each probed step")
        expect(float(r["cpu_seconds"]) > 0 and r["date"] and r["cpu"], f"L{r['layers']}: CPU-seconds, date and cpu")
    two = rows[0] if rows else {}
    if two:
        got = json.loads(subprocess.run([exe, "ablate", "--run", os.path.join(runs, "L2-s0"), "--json", "--what",
                                         two["induction_head"]], capture_output=True, text=True).stdout)
        expect(abs(float(two["late_acc_without_induction_head"]) - got["rows"][0]["late_token_accuracy"]) < 1e-3
               and abs(float(two["late_acc_intact"]) - got["intact"]["late_token_accuracy"]) < 1e-3,
               "the ablation figures are attnlab ablate's")
    with open(os.path.join(docs, "studies", "induction_heads.md")) as f:
        page = f.read()
    expect(all(f"<!-- BEGIN {n} -->" in page for n in ("runs", "ablation")), "the two blocks written")
    expect_redrawn(script, docs, runs, [os.path.join(docs, "figures", "induction_heads.png")])


def test_grokking(exe, work):
    """The grokking study on tiny runs: each row recounted from the run's metrics.csv and embedding_fourier.csv."""
    docs, runs = os.path.join(work, "gk-docs"), os.path.join(work, "gk-runs")
    script = os.path.join(ROOT, "scripts", "studies", "grokking_study.py")
    run([script, "--tiny", "--attnlab", exe, "--docs", docs, "--runs", runs])
    rows = read_rows(os.path.join(docs, "grokking.csv"))
    got = sorted((r["setting"], r["fraction"], r["weight_decay"]) for r in rows)
    expect(got == [("nanda", "0.5", "1"), ("nanda-default-init", "0.5", "1"), ("small", "0.5", "0"),
                   ("small", "0.5", "1"), ("sweep", "0.5", "0"), ("sweep", "0.5", "1"), ("sweep", "0.8", "1")],
           f"the Nanda runs, the small setting with and without weight decay, the sweep's weight decays at its "
           f"fraction and its other fraction (got {got})")
    for r in rows:  # Nanda's initialisation where the setting asks for it: gpt2 at 1/sqrt(d), learned positions
        name = f"{r['setting']}-f{r['fraction']}-wd{r['weight_decay']}-s{r['seed']}"
        with open(os.path.join(runs, name, "config.ini")) as f:
            config = f.read()
        nanda_init = r["setting"] in ("nanda", "small")
        expect(("init = gpt2\n" in config and "init-std = 0.1768\n" in config and "positional = learned\n" in config)
               == nanda_init, f"{name}: Nanda's initialisation {'missing' if nanda_init else 'not asked for'}")
    for r in rows:
        name = f"{r['setting']}-f{r['fraction']}-wd{r['weight_decay']}-s{r['seed']}"
        metrics = read_rows(os.path.join(runs, name, "metrics.csv"))
        memorised = next((m["step"] for m in metrics if float(m["train_exact"]) == 1.0), "")
        grokked = next((m["step"] for m in metrics if m["heldout_exact"] and float(m["heldout_exact"]) >= 0.99), "")
        expect((r["memorised_step"], r["grokked_step"]) == (memorised, grokked),
               f"{name}: memorised at {memorised!r}, grokked at {grokked!r} (got {r['memorised_step']!r}, "
               f"{r['grokked_step']!r})")
        fourier = read_rows(os.path.join(runs, name, "embedding_fourier.csv"))
        last = max(int(f["step"]) for f in fourier)
        energy = sorted(((float(f["norm"]) ** 2, int(f["frequency"])) for f in fourier
                         if int(f["step"]) == last and int(f["frequency"]) > 0), reverse=True)
        total, held, keys = sum(e for e, _ in energy), 0.0, []
        for e, k in energy:
            keys.append(k)
            held += e
            if held >= total / 2:
                break
        expect(r["key_frequencies"] == " ".join(map(str, keys)), f"{name}: key frequencies {keys}")
        expect(float(r["cpu_seconds"]) > 0 and r["date"] and r["cpu"] and r["final_weight_norm"], f"{name}: provenance")
    with open(os.path.join(docs, "studies", "grokking.md")) as f:
        page = f.read()
    expect(all(f"<!-- BEGIN {n} -->" in page for n in ("nanda", "reproduction", "weight_decay", "fraction", "frequencies")),
           "the five blocks written")
    expect_redrawn(script, docs, runs, [os.path.join(docs, "figures", f"grokking_{n}.png")
                                        for n in ("curves", "sweeps", "fourier")])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attnlab", required=True)
    args = p.parse_args()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib cannot be imported: the study scripts' test is skipped", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory() as work:
        test_gradient_flow(args.attnlab, work)
        test_learning_speed_tables(work)
        test_learning_speed_same_data()
        test_learning_speed_summary(work)
        test_experiments_tables(work)
        test_interventions(args.attnlab, work)
        test_critical_batch_size(args.attnlab, work)
        test_edge_of_stability(args.attnlab, work)
        test_induction_heads(args.attnlab, work)
        test_grokking(args.attnlab, work)
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
