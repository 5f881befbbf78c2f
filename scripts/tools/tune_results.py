"""scripts/tools/tune.py's results, from the study's storage alone: the trials table (printed, and as
DIR/summary.csv for attnlab report), the best configuration as a command to paste, and the
parameters' importances (Optuna's fANOVA evaluator, when scikit-learn is installed).
"""
import os
import shlex
import statistics
import sys

import optuna

from attnlab_runs.files import print_table, write_table
from attnlab_runs.flags import format_value, train_flags

STATES = {optuna.trial.TrialState.COMPLETE: "complete", optuna.trial.TrialState.PRUNED: "pruned",
          optuna.trial.TrialState.RUNNING: "running", optuna.trial.TrialState.WAITING: "waiting"}


def state_of(t):
    if t.state == optuna.trial.TrialState.FAIL:
        return t.user_attrs.get("ended", "failed")  # failed, interrupted or surplus
    return STATES[t.state]


def counted(t):
    """A trial that spends the --trials budget: finished, not interrupted, not a surplus one."""
    return t.state.is_finished() and state_of(t) not in ("interrupted", "surplus")


def _rounded(v, digits=4):
    return round(v, digits) if isinstance(v, float) else v


def rows(study, params):
    out = []
    for t in study.get_trials(deepcopy=False):
        if state_of(t) in ("surplus", "waiting"):
            continue
        a = t.user_attrs
        solved = a.get("solved", [])
        row = {"run": a.get("run", ""), "trial": t.number, "state": state_of(t),
               "objective": _rounded(t.value) if t.state == optuna.trial.TrialState.COMPLETE else "",
               "spread": _rounded(a["spread"]) if "spread" in a else "", "seeds": a.get("seeds", ""),
               "heldout_exact": _rounded(a.get("heldout_exact", "")),
               "heldout_token_acc": _rounded(a.get("heldout_token_acc", "")),
               "heldout_loss": _rounded(a.get("heldout_loss", "")),
               "solved_at_step": (statistics.median(solved) if min(solved) >= 0 else -1) if solved else "",
               "steps": int(a["steps"]) if "steps" in a else "", "seconds": a.get("seconds", ""),
               "cpu_seconds": a.get("cpu_seconds", ""), "exit": a.get("exit", "")}
        for p in params:
            row[p.name] = format_value(t.params[p.name]) if p.name in t.params else ""
        out.append(row)
    return out


def columns(params, objective):
    cols = ["trial", "run"] + [p.name for p in params] + ["objective", "spread", "state", "heldout_exact",
                                                          "solved_at_step", "steps", "cpu_seconds"]
    rest = ["seeds", "heldout_token_acc", "seconds", "exit"]
    if objective == "loss":
        cols.insert(cols.index("heldout_exact"), "heldout_loss")
    else:
        rest.append("heldout_loss")
    return cols, cols + rest


def best_command(study, params, exe, fixed):
    """The best complete trial as a train command (its own run directory replaced by runs/best)."""
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        return None, None
    best = study.best_trial
    values = {p.name: best.params[p.name] for p in params}  # in --param order
    if os.path.exists(exe):  # a path from here that a shell runs as written (not looked up on PATH)
        exe = os.path.relpath(exe)
        exe = exe if os.sep in exe else os.path.join(".", exe)
    cmd = [exe, "train"] + train_flags(values) + fixed
    return best, shlex.join(cmd + ["--run", "runs/best"])


def importances(study):
    """{param: importance} over the complete trials, or a string saying why there are none."""
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if len(complete) < 2:
        return "importances need at least 2 complete trials"
    try:
        return optuna.importance.get_param_importances(study)
    except ImportError:
        return "importances need scikit-learn (python3-sklearn)"
    except (RuntimeError, ValueError) as e:  # e.g. a parameter that never varied
        return f"importances not computed: {e}"


def report(study, params, objective, exe, out, fixed, stream=sys.stdout):
    """Prints the table, best command and importances; writes DIR/summary.csv. Returns the best trial."""
    table = rows(study, params)
    shown, every = columns(params, objective)
    write_table(os.path.join(out, "summary.csv"), every, table)
    print_table(shown, table, out=stream)
    by_state = {}
    for r in table:
        by_state[r["state"]] = by_state.get(r["state"], 0) + 1
    cpu = sum(r["cpu_seconds"] for r in table if r["cpu_seconds"] != "")
    print(f"trials: {', '.join(f'{n} {s}' for s, n in sorted(by_state.items()))}; CPU-seconds {cpu:.1f}", file=stream)
    for t in study.get_trials(deepcopy=False):
        if state_of(t) == "failed":
            print(f"trial {t.number} failed (exit {t.user_attrs.get('exit')}): {t.user_attrs.get('error', '')}",
                  file=stream)
    best, cmd = best_command(study, params, exe, fixed)
    if best is not None:
        print(f"best: trial {best.number}, objective {_rounded(best.value)}", file=stream)
        print(f"  {cmd}", file=stream)
    imp = importances(study)
    if isinstance(imp, str):
        print(imp, file=stream)
    else:
        print("importances (fANOVA): " + ", ".join(f"{k} {v:.2f}" for k, v in imp.items()), file=stream)
    print(os.path.join(out, "summary.csv"), file=stream)
    return best
