"""One trial of scripts/tools/tune.py: its configuration trained with each seed (ordinary attnlab runs, side
by side), their held-out rows read from metrics.csv as attnlab appends them, the seeds' median at
each evaluated step reported to Optuna, and the runs stopped with SIGTERM when Optuna prunes the
trial (attnlab checkpoints and exits 143).

Objectives, each seed's value taken from its files, the trial's value the seeds' median:
  exact   held-out exact match at the end (maximised); reported during the run: held-out exact match
  loss    held-out loss at the last evaluation (minimised; language models: --task text); reported: the same
  steps   the step at which --target was reached (minimised); a seed that never reached it counts
          steps run x (2 - its final held-out exact match), worse than any seed that did, and closer
          the nearer it came; reported during the run: 1 - held-out exact match
"""
import os
import statistics
import time

from attnlab_runs.files import heldout_rows, read_summary
from attnlab_runs.launch import Run, train_args

POLL_SECONDS = 0.2


class Objective:
    def __init__(self, name):
        self.name = name
        self.direction = "maximize" if name == "exact" else "minimize"

    def intermediate(self, row):
        """The figure a held-out row reports to the pruner (None: the row lacks it)."""
        if self.name == "exact":
            return row["heldout_exact"]
        if self.name == "loss":
            return row.get("heldout_loss")
        return 1.0 - row["heldout_exact"]

    def final(self, summary, rows):
        """One seed's value from its summary.json and held-out rows; a string says why there is none."""
        if self.name == "exact":
            return summary["heldout_exact"]
        if self.name == "loss":
            losses = [r["heldout_loss"] for r in rows if "heldout_loss" in r]
            return losses[-1] if losses else "metrics.csv has no heldout_loss (the run ended before its first evaluation)"
        if summary["solved_at_step"] >= 0:
            return float(summary["solved_at_step"])
        return summary["steps"] * (2.0 - summary["heldout_exact"])


class Outcome:
    """What a trial ended as: state 'complete', 'pruned', 'failed' or 'interrupted', its value (complete
    only) and its figures (the seeds' medians of their last held-out row), all for the trial's record."""

    def __init__(self, state, value=None, attrs=None):
        self.state, self.value, self.attrs = state, value, attrs or {}


def run_base(number):
    return f"trial{number:04d}"


def run_names(base, seeds):
    return [base] if seeds == 1 else [f"{base}-seed{i}" for i in range(seeds)]


def _median(values):
    return statistics.median(values) if values else None


class TrialRunner:
    """Trains one configuration with each seed and decides together what the trial ended as."""

    def __init__(self, exe, out, objective, seeds, base_seed, stop_event):
        self.exe, self.out, self.objective = exe, out, objective
        self.seeds, self.base_seed, self.stop = seeds, base_seed, stop_event

    def start(self, base, flags, resume):
        """Each seed's run: new (a directory already there is attnlab's to refuse, never replaced), or,
        for an interrupted trial queued again (resume), continued from its checkpoint or taken as finished."""
        self.runs = []
        for i, name in enumerate(run_names(base, self.seeds)):
            seed = ["--seed", str(self.base_seed + i)] if self.seeds > 1 else []
            run, log = os.path.join(self.out, name), os.path.join(self.out, name + ".log")
            if resume and read_summary(run) is not None:
                self.runs.append(Run.finished(run, log))
            else:
                self.runs.append(Run(self.exe, run, train_args(run, flags + seed) if resume else ["--run", run] + flags + seed,
                                     log))

    def _ready_steps(self, rows, reported):
        """Steps every seed has evaluated (a seed that has ended counts with its last row), not yet reported,
        each with the seeds' median figure."""
        steps = sorted({r["step"] for rs in rows for r in rs} - reported)
        out = []
        for step in steps:
            values = []
            for run, rs in zip(self.runs, rows):
                at = [r for r in rs if r["step"] <= step]
                if not at or (at[-1]["step"] < step and run.poll() is None):
                    return out  # a running seed has not evaluated this step yet
                v = self.objective.intermediate(at[-1])
                if v is None:
                    return out
                values.append(v)
            out.append((int(step), statistics.median(values)))
        return out

    def watch(self, trial):
        """Reports each step to the trial as the seeds evaluate it; prunes or stops the runs when told.
        Returns 'pruned', 'interrupted' or None (every run ended by itself)."""
        reported, why = set(), None
        while True:
            ended = all(r.poll() is not None for r in self.runs)
            rows = [heldout_rows(r.run) for r in self.runs]
            for step, value in self._ready_steps(rows, reported):
                reported.add(step)
                trial.report(value, step)
                if why is None and trial.should_prune():
                    why = "pruned"
            if why is None and self.stop.is_set():
                why = "interrupted"
            if why is None and any(r.poll() not in (None, 0) for r in self.runs):
                why = "failed"  # one seed failed: the others are stopped, the trial has no value
            if why is not None:
                for r in self.runs:
                    r.terminate()
                for r in self.runs:
                    r.wait()
                if why == "pruned" and not any(r.terminated for r in self.runs):
                    return None  # every run had ended by itself: its result stands
                return None if why == "failed" else why
            if ended:
                return None
            time.sleep(POLL_SECONDS)

    def figures(self):
        """The seeds' medians of their last held-out row, CPU-seconds (all seeds), and the seed count."""
        last = [rs[-1] for rs in (heldout_rows(r.run) for r in self.runs) if rs]
        attrs = {"cpu_seconds": round(sum(r.cpu_seconds for r in self.runs), 2),
                 "seconds": round(max(r.seconds or 0 for r in self.runs), 2), "seeds": self.seeds,
                 "run": os.path.basename(self.runs[0].run)}
        for key in ("heldout_exact", "heldout_token_acc", "heldout_loss", "step"):
            m = _median([r[key] for r in last if key in r])
            if m is not None:
                attrs["steps" if key == "step" else key] = m
        return attrs

    def outcome(self, stopped):
        attrs = self.figures()
        if stopped in ("pruned", "interrupted"):
            attrs["exit"] = self.runs[0].exit  # 143 where attnlab checkpointed on SIGTERM
            return Outcome(stopped, attrs=attrs)
        failed = [r for r in self.runs if r.exit != 0 and not r.terminated]
        if failed:
            r = failed[0]
            attrs.update(exit=r.exit, error=r.first_line() or "(no output)", failed_run=os.path.basename(r.run))
            return Outcome("failed", attrs=attrs)
        values = []
        for r in self.runs:
            summary = read_summary(r.run)
            if summary is None:
                attrs.update(exit=r.exit, error="exit 0 but no summary.json", failed_run=os.path.basename(r.run))
                return Outcome("failed", attrs=attrs)
            v = self.objective.final(summary, heldout_rows(r.run))
            if isinstance(v, str):
                attrs.update(exit=r.exit, error=v, failed_run=os.path.basename(r.run))
                return Outcome("failed", attrs=attrs)
            values.append(v)
            attrs.setdefault("solved", []).append(summary["solved_at_step"])
        attrs["exit"] = 0
        attrs["seed_values"] = values
        attrs["spread"] = max(values) - min(values)
        return Outcome("complete", statistics.median(values), attrs)

    def run(self, trial, base, flags, resume=False):
        self.start(base, flags, resume)
        return self.outcome(self.watch(trial))
