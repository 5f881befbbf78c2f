"""The training parts of scripts/studies/gradient_flow_study.py (docs/gradient_flow.md, "In training: warm-up").

  warmup     the decoder with each of --warm-layers blocks, --norm pre and post, each lr of --lrs, without
             warm-up and with --warmup-steps of linear warm-up, seeds --seeds: steps to 100% held-out exact
             match (evaluated every 100 steps, cap --cap), divergence (a non-finite loss ends the run), the
             loss at the end, and the largest per-step gradient norm of the first 100 steps (--log-every 1:
             metrics.csv's grad_norm of one step, unclipped). Rows go to gradient_flow_warmup.csv.
  sharpness  short runs of the same settings (seeds --probe-seeds, --probe-steps steps) with
             --probe-sharpness --probe-interval: lambda_max of the Hessian H and of Adam's preconditioned
             P^-1 H on step 1's batch, times the step's lr, against Gilmer et al.'s 2 (gradient descent's
             limit) and Cohen et al.'s 38 (Adam's, for P^-1 H). Rows go to gradient_flow_sharpness.csv.

A row replaces the earlier row of the same setting and seed (and step and operator). Rows of the warm-up
CSV written before per-step logging (grad_log_every 50) hold the larger of two 50-step means instead.
"""
import datetime
import math
import os
import shutil
import time

from attnlab_runs.files import read_csv, write_table
from attnlab_runs.launch import Run, run_child, run_pool
from attnlab_runs.schema import METRICS
from attnlab_runs.study import cpu_kind, median, median_range, replace_block

WARM_KEY = ["layers", "norm", "lr", "warmup", "seed"]
WARM_FIELDS = WARM_KEY + ["solved_at", "diverged", "final_exact", "max_grad_norm_first_100", "grad_log_every",
                          "final_loss", "steps_run", "cap", "cpu_seconds", "date", "cpu"]
SHARP_FIELDS = WARM_KEY + ["step", "operator", "lambda_max", "step_lr", "lambda_eta", "limit", "converged",
                           "loss", "grad_norm", "run_cpu_seconds", "date", "cpu"]
LIMITS = {"hessian": 2.0, "preconditioned": 38.0}


def stamp():
    return {"date": datetime.date.today().isoformat(), "cpu": cpu_kind()}


def train(exe, flags, run_dir):
    """(exit code, CPU seconds) of `attnlab train FLAGS`, one thread; a failed run is read back, not raised."""
    cmd = [exe, "train"] + flags + ["--threads", "1", "--quiet", "--overwrite", "--run", run_dir]
    code, _, _, cpu = run_child(cmd)
    return code, cpu


def train_until_probe(exe, flags, run_dir, last):
    """(exit code, CPU seconds) of `attnlab train FLAGS` stopped (SIGTERM: it finishes its step and exits
    143) once probe_sharpness.csv holds step `last` (None: never), or at its end; one thread."""
    if os.path.lexists(run_dir):
        shutil.rmtree(run_dir)
    os.makedirs(os.path.dirname(run_dir), exist_ok=True)
    child = Run(exe, run_dir, flags + ["--threads", "1", "--quiet", "--run", run_dir], run_dir + ".log")
    probe = os.path.join(run_dir, "probe_sharpness.csv")
    while child.poll() is None:
        if last and os.path.exists(probe) and any(r["step"] == str(last) for r in read_csv(probe)):
            child.terminate()
            child.wait()
            break
        time.sleep(0.2)
    return (0 if child.exit == 143 else child.exit), child.cpu_seconds


def setting_flags(base, layers, norm, lr, warmup, seed):
    return base + ["--model", "decoder", "--norm", norm, "--layers", str(layers), "--lr", str(lr), "--warmup",
                   str(warmup), "--clip", "0", "--seed", str(seed), "--log-every", "1"]


def finite(x):
    return x != "" and math.isfinite(float(x))


def warm_job(args, base, job):
    layers, norm, lr, warmup, seed = job
    run = os.path.join(args.runs, f"warm-L{layers}-{norm}-lr{lr}-w{warmup}-s{seed}")
    flags = setting_flags(base, layers, norm, lr, warmup, seed) + [
        "--steps", str(args.cap), "--eval-every", "100", "--target", "1", "--heldout", "200"]
    code, cpu = train(args.attnlab, flags, run)
    metrics = read_csv(os.path.join(run, METRICS), missing_ok=True)
    evals = [(int(r["step"]), float(r["heldout_exact"])) for r in metrics if r["heldout_exact"] != ""]
    norms = [float(r["grad_norm"]) for r in metrics if int(r["step"]) <= 100 and r["grad_norm"] != ""]
    losses = [r["loss"] for r in metrics if r["loss"] != ""]
    diverged = code != 0 or any(not finite(x) for x in losses)
    return {"layers": layers, "norm": norm, "lr": lr, "warmup": warmup, "seed": seed,
            "solved_at": next((s for s, e in evals if e >= 1.0), ""), "diverged": int(diverged),
            "final_exact": evals[-1][1] if evals else 0.0,
            "max_grad_norm_first_100": f"{max(norms):.4g}" if norms else "", "grad_log_every": 1,
            "final_loss": f"{float(losses[-1]):.4g}" if losses else "", "steps_run": metrics[-1]["step"] if metrics else 0,
            "cap": args.cap, "cpu_seconds": f"{cpu:.1f}", **stamp()}


def sharp_job(args, base, job):
    layers, norm, lr, warmup, seed = job
    run = os.path.join(args.runs, f"sharp-L{layers}-{norm}-lr{lr}-w{warmup}-s{seed}")
    steps = max(args.probe_steps, warmup + 1)  # attnlab wants the warm-up to end before --steps
    flags = setting_flags(base, layers, norm, lr, warmup, seed) + [
        "--steps", str(steps), "--eval-every", str(steps), "--heldout", "20", "--target", "0",
        "--probe-sharpness", str(args.probe_interval), "--sharpness-tol", str(args.sharpness_tol)]
    code, cpu = train_until_probe(args.attnlab, flags, run, args.probe_steps if steps > args.probe_steps else None)
    grad = {r["step"]: r["grad_norm"] for r in read_csv(os.path.join(run, METRICS), missing_ok=True)}
    rows = []
    for r in read_csv(os.path.join(run, "probe_sharpness.csv"), missing_ok=True):
        if int(r["step"]) > args.probe_steps:
            continue
        lam, step_lr = float(r["lambda_max"]), float(r["lr"])
        rows.append({"layers": layers, "norm": norm, "lr": lr, "warmup": warmup, "seed": seed, "step": r["step"],
                     "operator": r["operator"], "lambda_max": f"{lam:.5g}", "step_lr": f"{step_lr:.4g}",
                     "lambda_eta": f"{lam * step_lr:.4g}", "limit": LIMITS.get(r["operator"], ""),
                     "converged": r["converged"], "loss": f"{float(r['loss']):.4g}", "grad_norm": grad.get(r["step"], ""),
                     "run_cpu_seconds": f"{cpu:.1f}", **stamp()})
    if code != 0 and not rows:
        raise RuntimeError(f"the sharpness run {run} failed ({code}) before its first probe")
    return rows


def merge(path, fields, key, new):
    """The CSV at `path` with `new` rows replacing the rows of the same key; old rows keep their columns."""
    done = {key(r) for r in new}
    old = [r for r in read_csv(path, missing_ok=True) if key(r) not in done]
    write_table(path, fields, old + new)
    print(f"wrote {path} ({len(old) + len(new)} rows, {len(new)} new)")


def run_warmup(args, base):
    jobs = [(L, n, lr, w, s) for L in args.warm_layers for n in ("pre", "post") for lr in args.lrs
            for w in (0, args.warmup_steps) for s in args.seeds]
    new = run_pool(lambda j: warm_job(args, base, j), jobs, args.jobs, "gradient_flow_study")
    merge(os.path.join(args.out, "gradient_flow_warmup.csv"), WARM_FIELDS,
          lambda r: tuple(str(r[k]) for k in WARM_KEY), new)


def run_sharpness(args, base):
    jobs = [(L, n, lr, w, s) for L in args.warm_layers for n in ("pre", "post") for lr in args.lrs
            for w in args.probe_warmups for s in args.probe_seeds]
    new = [row for rows in run_pool(lambda j: sharp_job(args, base, j), jobs, args.jobs, "gradient_flow_study")
           for row in rows]
    merge(os.path.join(args.out, "gradient_flow_sharpness.csv"), SHARP_FIELDS,
          lambda r: tuple(str(r[k]) for k in WARM_KEY + ["step", "operator"]), new)


def setting_keys(rows):
    """The (layers, norm, lr, warm-up) settings of rows, in a fixed order."""
    keys = {(r["layers"], r["norm"], r["lr"], r["warmup"]) for r in rows}
    return sorted(keys, key=lambda k: (int(k[0]), float(k[2]), int(k[3]), k[1]))


def of(rows, key):
    return [r for r in rows if (r["layers"], r["norm"], r["lr"], r["warmup"]) == key]


def warm_table(rows):
    """The page's table of the warm-up rows: one line per setting, medians and ranges over its seeds."""
    lines = ["| blocks | lr | warm-up | norm | seeds | steps to 100% held-out, median (range) | diverged | "
             "loss at the end, median | max per-step grad norm, first 100 steps | CPU-s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key in setting_keys(rows):
        rs = of(rows, key)
        cap = max(int(r.get("cap") or r.get("steps_run") or 0) for r in rs)
        steps = [int(r["solved_at"]) if r["solved_at"] else None for r in rs]
        losses = [float(r["final_loss"]) for r in rs if r.get("final_loss") and finite(r["final_loss"])]
        grads = [float(r["max_grad_norm_first_100"]) for r in rs if r["max_grad_norm_first_100"]]
        every = {r.get("grad_log_every") or "50" for r in rs}
        g = f"{min(grads):.2f}–{max(grads):.2f}" if grads else "–"
        if every != {"1"}:
            g += " (50-step means)"
        cpu = sum(float(r.get("cpu_seconds") or 0) for r in rs)
        lines.append(f"| {key[0]} | {key[2]} | {key[3]} | {key[1]} | {' '.join(sorted(r['seed'] for r in rs))} | "
                     f"{median_range(steps, cap)} | {sum(int(r['diverged']) for r in rs)} of {len(rs)} | "
                     f"{f'{median(losses):.3g}' if losses else '–'} | {g} | {cpu:.0f} |")
    return "\n".join(lines)


def spread(values, fmt):
    """'v' for one value (or equal values), 'lo–hi' over several seeds."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def sharp_table(rows):
    """The page's table of the sharpness rows, a line per setting (a range where several seeds were probed):
    lambda_max(H) at the first and last probe, the largest lambda_max(H) * lr (against 2), lambda_max(P^-1 H) * lr
    at the first and last probe and the probes where it passed 38."""
    lines = ["| blocks | lr | warm-up | norm | seeds | λ_max(H), step 1 → last probe | largest λ_max(H)·η (limit 2) | "
             "λ_max(P⁻¹H)·η, step 1 → last probe | probes past 38 | CPU-s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key in setting_keys(rows):
        rs = of(rows, key)
        seeds = sorted({r["seed"] for r in rs})
        runs = [sorted((r for r in rs if r["seed"] == s), key=lambda r: int(r["step"])) for s in seeds]
        h = [[r for r in run if r["operator"] == "hessian"] for run in runs]
        p = [[r for r in run if r["operator"] == "preconditioned"] for run in runs]
        past = [sum(float(r["lambda_eta"]) > LIMITS["preconditioned"] for r in run) for run in p]
        cpu = sum(float(run[0]["run_cpu_seconds"]) for run in runs)
        lines.append(
            f"| {key[0]} | {key[2]} | {key[3]} | {key[1]} | {' '.join(seeds)} | "
            f"{spread([float(r[0]['lambda_max']) for r in h], '{:.3g}')} → "
            f"{spread([float(r[-1]['lambda_max']) for r in h], '{:.3g}')} (step {h[0][-1]['step']}) | "
            f"{spread([max(float(x['lambda_eta']) for x in r) for r in h], '{:.2g}')} | "
            f"{spread([float(r[0]['lambda_eta']) for r in p], '{:.2g}')} → "
            f"{spread([float(r[-1]['lambda_eta']) for r in p], '{:.2g}')} | "
            f"{spread(past, '{}')} of {len(p[0])} | {cpu:.0f} |")
    return "\n".join(lines)


def write_tables(out):
    """The page's generated blocks (gradient_flow.md in `out`, when it is there) from the CSVs."""
    page = os.path.join(out, "gradient_flow.md")
    if not os.path.exists(page):
        return
    with open(page) as f:
        text = f.read()
    for name, table in (("warmup", warm_table), ("sharpness", sharp_table)):
        rows = read_csv(os.path.join(out, f"gradient_flow_{name}.csv"), missing_ok=True)
        if rows:
            text = replace_block(text, f"gradient_flow_{name}", table(rows))
    with open(page, "w") as f:
        f.write(text)
    print(f"wrote the tables of {page}")


def plot_warmup(plt, rows, figs):
    """Steps to solve against lr, a panel per depth: o with warm-up hollow, x not solved by the cap."""
    depths = sorted({int(r["layers"]) for r in rows})
    fig, axes = plt.subplots(1, len(depths), figsize=(4.2 * len(depths), 3.8), sharey=True, squeeze=False)
    cap = max(int(r.get("cap") or r.get("steps_run") or 1) for r in rows)
    for ax, L in zip(axes[0], depths):
        for key in setting_keys([r for r in rows if int(r["layers"]) == L]):
            colour = "tab:red" if key[1] == "post" else "tab:blue"
            shift = (1.08 if key[1] == "post" else 0.93) * (1.03 if key[3] != "0" else 0.97)
            for i, r in enumerate(of(rows, key)):
                x = float(key[2]) * shift * (1 + 0.02 * (i - 1))
                if r["solved_at"]:
                    ax.plot(x, int(r["solved_at"]), "o", ms=5, color=colour, mfc=colour if key[3] == "0" else "none")
                else:
                    ax.plot(x, cap * 1.15, "x", ms=6, color=colour)
        ax.axhline(cap * 1.08, color="grey", lw=0.5)
        ax.set_xscale("log")
        ax.set_xlabel("lr (AdamW)")
        ax.set_title(f"decoder, {L} blocks (cap {max(int(r.get('cap') or 0) for r in rows if int(r['layers']) == L)})")
    axes[0][0].set_ylabel("steps to 100% held-out (x: not by the cap)")
    for norm, colour in (("pre", "tab:blue"), ("post", "tab:red")):
        axes[0][-1].plot([], [], "o", color=colour, label=f"{norm}-LN, no warm-up")
        axes[0][-1].plot([], [], "o", color=colour, mfc="none", label=f"{norm}-LN, warm-up")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(figs, "gradient_flow_warmup.png"), dpi=100)
    plt.close(fig)


def plot_sharpness(plt, rows, figs):
    """lambda_max * lr over the first steps (each setting's first seed), a row of panels per depth: H against 2
    and P^-1 H against 38, without warm-up and with it."""
    depths = sorted({int(r["layers"]) for r in rows})
    panels = [(op, warm) for warm in (False, True) for op in ("hessian", "preconditioned")]
    fig, axes = plt.subplots(len(depths), 4, figsize=(15, 3.1 * len(depths)), squeeze=False)
    lrs = sorted({r["lr"] for r in rows}, key=float)
    for row_axes, L in zip(axes, depths):
        for ax, (op, warm) in zip(row_axes, panels):
            for key in setting_keys([r for r in rows if int(r["layers"]) == L and (r["warmup"] != "0") == warm]):
                first = min(r["seed"] for r in of(rows, key))
                rs = sorted((r for r in of(rows, key) if r["operator"] == op and r["seed"] == first),
                            key=lambda r: int(r["step"]))
                ax.plot([int(r["step"]) for r in rs], [float(r["lambda_eta"]) for r in rs],
                        ["-", "--", ":", "-."][lrs.index(key[2]) % 4], marker="o", ms=3,
                        color="tab:red" if key[1] == "post" else "tab:blue", label=f"{key[1]}-LN lr {key[2]}")
            ax.axhline(LIMITS[op], color="k", lw=0.8, ls="--")
            ax.set_yscale("log")
            ax.set_title(f"{L} blocks, {'warm-up' if warm else 'no warm-up'}: "
                         f"λ_max({'H' if op == 'hessian' else 'P⁻¹H'})·η (dashed {LIMITS[op]:g})", fontsize=9)
            ax.set_xlabel("step")
        row_axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(figs, "gradient_flow_sharpness.png"), dpi=80)
    plt.close(fig)


def plot(plt, out, figs):
    for name, draw in (("warmup", plot_warmup), ("sharpness", plot_sharpness)):
        rows = read_csv(os.path.join(out, f"gradient_flow_{name}.csv"), missing_ok=True)
        if rows:
            draw(plt, rows, figs)
