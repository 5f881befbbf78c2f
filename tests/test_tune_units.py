#!/usr/bin/env python3
"""scripts/tools/tune.py's decisions, one function at a time, in-process (a ctest test of a few seconds;
needs Optuna, else skipped). Each check pins a behaviour that a planted bug once broke unnoticed:

1. the pruner reads held-out exact match (1 - it for --objective steps), not token accuracy;
2. a log:LO:HI range is sampled on a log scale, a float:LO:HI one uniformly;
3. --objective steps: a seed that never reached the target counts worse than one that reached it at
   its last step;
4. surplus trials (racing workers) and interrupted ones do not spend --trials;
5. once one seed has ended, the later steps of the others are still reported (with its last row);
6. a failed trial names the seed that failed, not one the tuner stopped because of it;
7. the table's solved_at_step is -1 when one seed never solved;
8. the sampler seeds of two workers differ, whatever their --study-seed (1 + 1 once met 2 + 0).

Exit 0: passed; 1: failed; 77: optuna cannot be imported (ctest: skipped).
"""
import importlib.util
import os
import sys
import tempfile
import threading

from checks import check, verdict

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77

if importlib.util.find_spec("optuna") is None:
    print("test_tune_units: SKIPPED: optuna cannot be imported by", sys.executable)
    sys.exit(SKIP)

import optuna  # noqa: E402

import tune  # noqa: E402
import tune_results  # noqa: E402
import tune_study  # noqa: E402
from attnlab_runs.flags import flag_names  # noqa: E402
from tune_space import parse_param  # noqa: E402
from tune_trial import Objective, TrialRunner  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


class StubRun:
    """What TrialRunner reads of a run: its directory, exit code, whether the tuner stopped it, its output."""

    def __init__(self, run, exit, terminated=False, line=""):
        self.run, self.exit, self.terminated, self.line = run, exit, terminated, line
        self.cpu_seconds, self.seconds = 0.5, 1.0

    def poll(self):
        return self.exit

    def terminate(self, *_):
        pass

    def first_line(self):
        return self.line


def check_pruner_figure():
    row = {"step": 10.0, "heldout_exact": 0.2, "heldout_token_acc": 0.9}
    check(Objective("exact").intermediate(row) == 0.2, "exact: the pruner sees held-out exact match, not token accuracy")
    check(abs(Objective("steps").intermediate(row) - 0.8) < 1e-12, "steps: the pruner sees 1 - held-out exact match")


def check_log_scale():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    parse_param("lr=log:1e-4:1e-2").suggest(trial)
    parse_param("dropout=float:0:0.3").suggest(trial)
    check(trial.distributions["lr"].log, "log:LO:HI is sampled on a log scale", str(trial.distributions))
    check(not trial.distributions["dropout"].log, "float:LO:HI is sampled uniformly")
    values = [parse_param("lr=log:1e-4:1e-2").suggest(study.ask()) for _ in range(400)]
    below = sum(v < 1e-3 for v in values) / len(values)
    # log-uniform: half below the geometric middle 1e-3; uniform: 0.9e-3 / 9.9e-3, under a tenth.
    check(0.35 < below < 0.65, f"log:1e-4:1e-2: about half the draws below 1e-3 ({below:.2f})")


def check_unsolved_seed():
    steps = Objective("steps")
    solved_last = steps.final({"solved_at_step": 100, "steps": 100, "heldout_exact": 1.0}, [])
    unsolved = steps.final({"solved_at_step": -1, "steps": 100, "heldout_exact": 0.9}, [])
    check(solved_last == 100.0 and unsolved > solved_last,
          f"steps: an unsolved seed ({unsolved}) counts worse than one solved at its last step ({solved_last})")


def check_budget():
    def trial(state, **attrs):
        return optuna.trial.create_trial(state=state, value=1.0 if state == optuna.trial.TrialState.COMPLETE else None,
                                         user_attrs=attrs)
    complete, fail = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL
    check(tune_results.counted(trial(complete)) and tune_results.counted(trial(fail, ended="failed")),
          "complete and failed trials spend --trials")
    check(not tune_results.counted(trial(fail, ended="surplus")) and not tune_results.counted(trial(fail, ended="interrupted")),
          "surplus and interrupted trials do not spend --trials")
    worker = tune_study.Worker.__new__(tune_study.Worker)

    class Args:
        trials, cpu_budget, sampler = 2, None, "tpe"
    worker.args, worker.study = Args(), None
    trials = [trial(complete), trial(fail, ended="surplus"), trial(fail, ended="surplus")]
    check(worker._budget_left(trials), "--trials 2 with 1 complete and 2 surplus trials: a trial is left to run")
    check(not worker._budget_left(trials + [trial(complete)]), "--trials 2 with 2 complete trials: none left")


def check_ended_seed(tmp):
    runner = TrialRunner("attnlab", tmp, Objective("exact"), 2, 0, threading.Event())
    runner.runs = [StubRun(os.path.join(tmp, "a"), 0), StubRun(os.path.join(tmp, "b"), None)]
    rows = [[{"step": 10.0, "heldout_exact": 0.2}, {"step": 20.0, "heldout_exact": 0.4}],
            [{"step": s, "heldout_exact": s / 100} for s in (10.0, 20.0, 30.0, 40.0)]]
    got = runner._ready_steps(rows, set())
    check([s for s, _ in got] == [10, 20, 30, 40] and got[3][1] == (0.4 + 0.4) / 2,
          "a seed that has ended counts with its last row: the other seed's later steps are reported", str(got))
    runner.runs[0] = StubRun(os.path.join(tmp, "a"), None)
    check([s for s, _ in runner._ready_steps(rows, set())] == [10, 20],
          "a seed still running holds back the steps it has not evaluated")


def check_failed_seed(tmp):
    runner = TrialRunner("attnlab", tmp, Objective("exact"), 2, 0, threading.Event())
    runner.runs = [StubRun(os.path.join(tmp, "trial0003-seed0"), 143, terminated=True),
                   StubRun(os.path.join(tmp, "trial0003-seed1"), 1, line="attnlab train: simulated crash")]
    outcome = runner.outcome(None)
    check(outcome.state == "failed" and outcome.attrs["failed_run"] == "trial0003-seed1" and
          outcome.attrs["exit"] == 1 and outcome.attrs["error"] == "attnlab train: simulated crash",
          "a failed trial names the seed that failed (exit 1), not the one the tuner stopped (143)", str(outcome.attrs))


def check_table_solved():
    study = optuna.create_study()
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, value=150.0,
                                              user_attrs={"solved": [100, -1, 120], "run": "trial0000"}))
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, value=110.0,
                                              user_attrs={"solved": [100, 110, 120], "run": "trial0001"}))
    rows = tune_results.rows(study, [])
    check(rows[0]["solved_at_step"] == -1, "one seed never solved: the table's solved_at_step is -1", str(rows[0]))
    check(rows[1]["solved_at_step"] == 110, "every seed solved: their median step", str(rows[1]))


def check_worker_seeds():
    # Worker 1 created the study with --study-seed 2; worker 2 joins it after a trial with --study-seed 1.
    creator, joiner = tune_study.worker_seed(2, True), tune_study.worker_seed(1, False)
    check(creator == 2, "the worker that creates the study uses --study-seed itself (a fresh study repeats)")
    check(joiner != creator, f"a worker that joins draws another sampler seed ({joiner}, the creator's {creator})")
    joiners = {tune_study.worker_seed(1, False) for _ in range(20)}
    check(len(joiners) == 20, "workers joining with the same --study-seed draw different seeds")
    check(tune_study.worker_seed(None, False) is None, "no --study-seed: the sampler seeds itself")


def check_grid_left():
    """The grid sampler's rule, through Optuna's public API: a grid point is left while no trial of it has finished."""
    grid = {"lr": [0.1, 0.2], "layers": [1, 2]}
    study = optuna.create_study(sampler=tune_study.QuietGrid(grid, seed=0))
    worker = tune_study.Worker.__new__(tune_study.Worker)

    class Args:
        pass
    Args.grid, worker.args, worker.study = grid, Args(), study
    asked = []
    for _ in range(4):
        trial = study.ask()
        asked.append((trial, {name: trial.suggest_categorical(name, values) for name, values in grid.items()}))
    check(len({tuple(p.values()) for _, p in asked}) == 4, "the grid sampler proposes the 4 points once each")
    for trial, _ in asked[:3]:
        study.tell(trial, 1.0)
    check(worker._grid_left(study.get_trials(deepcopy=False)), "3 of 4 grid points finished, 1 running: one is left")
    study.tell(asked[3][0], state=optuna.trial.TrialState.FAIL)
    check(not worker._grid_left(study.get_trials(deepcopy=False)), "every grid point finished (one failed): none left")


def check_seed_flag():
    """--seed S and --seed=S after -- give the same seeds; with --seeds N the flag goes, the tuner adds each seed."""
    for given in (["--seed", "5"], ["--seed=5"]):
        args = tune.parse_args(["--out", "x", "--param", "lr=log:1e-3:1e-2", "--seeds", "2", "--"] + given)
        tune.check_args(args)
        check(args.base_seed == 5 and "seed" not in flag_names(args.fixed),
              f"-- {' '.join(given)} --seeds 2: seeds 5 and 6, the flag itself not passed on", str(args.fixed))
    args = tune.parse_args(["--out", "x", "--param", "lr=log:1e-3:1e-2", "--", "--seed=7"])
    tune.check_args(args)
    check(args.base_seed == 7 and args.fixed == ["--seed=7"], "-- --seed=7 alone: seed 7, passed on as given",
          str(args.fixed))


def main():
    with tempfile.TemporaryDirectory(prefix="test_tune_units-") as tmp:
        for step in (check_pruner_figure, check_log_scale, check_unsolved_seed, check_budget,
                     lambda: check_ended_seed(tmp), lambda: check_failed_seed(tmp), check_table_solved,
                     check_worker_seeds, check_grid_left, check_seed_flag):
            step()
    return verdict("test_tune_units")


if __name__ == "__main__":
    sys.exit(main())
