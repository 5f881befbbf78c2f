"""scripts/tools/tune.py's study: its storage, sampler and pruner, the worker that asks it for trials and
runs them (--jobs at a time) within the budget, and what a worker does when Ctrl-C stops it."""
import hashlib
import itertools
import os
import random
import signal
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import optuna

from attnlab_runs.flags import default_flags, train_flags
from attnlab_runs.launch import claim_directory
from attnlab_runs.tool import launcher_rank_size
from tune_results import counted, report
from tune_trial import Objective, TrialRunner, run_base


class Refused(Exception):
    """A study this worker cannot open or join: one line, exit 2 (scripts/tools/tune.py)."""


class QuietGrid(optuna.samplers.GridSampler):
    """The grid sampler without its study.stop(), which only works inside study.optimize; the worker
    loop below stops once no grid point is left."""

    def after_trial(self, study, trial, state, values):
        pass


def storage_of(args):
    url = args.storage or "sqlite:///" + os.path.abspath(os.path.join(args.out, "study.db"))
    if url.startswith("journal:"):
        path = url[len("journal:"):]
        return optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(
            path, lock_obj=optuna.storages.JournalFileOpenLock(path)))
    # A long timeout: several workers write to one SQLite file.
    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)


def sampler_of(args, seed):
    if args.sampler == "grid":
        return QuietGrid(args.grid, seed=seed)
    if args.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def worker_seed(study_seed, created):
    """The sampler's seed: --study-seed itself for the worker that created the study (a fresh study with
    one worker proposes the same values for the same seed); every other worker (another process, an
    mpirun rank, a resume) mixes it with an identity of its own, so no two workers draw the same values,
    whatever their --study-seed and however many trials there are."""
    if study_seed is None:
        return None
    if created:
        return study_seed
    identity = f"{study_seed}:{uuid.uuid4()}".encode()
    return int.from_bytes(hashlib.sha256(identity).digest()[:4], "little")


def pruner_of(args):
    return {"median": lambda: optuna.pruners.MedianPruner(n_startup_trials=3),
            "halving": optuna.pruners.SuccessiveHalvingPruner, "hyperband": optuna.pruners.HyperbandPruner,
            "none": optuna.pruners.NopPruner}[args.pruner]()


def settings_record(args):
    """What makes a study this study: a resume or another worker with other settings is refused."""
    return {"params": [p.spec() for p in args.space], "objective": args.objective, "fixed": args.fixed,
            "seeds": args.seeds, "sampler": args.sampler}


def storage_name(args):
    return args.storage or os.path.join(args.out, "study.db")


def create_or_load(args):
    """The study, and whether this worker created it. Workers that start together race to create a new
    database's tables ("already exists", a unique constraint, "database is locked"): the loser tries again."""
    direction = Objective(args.objective).direction
    for attempt in range(5):
        try:
            storage = storage_of(args)
            try:
                return optuna.create_study(study_name="tune", storage=storage, sampler=sampler_of(args, None),
                                           pruner=pruner_of(args), direction=direction), True
            except optuna.exceptions.DuplicatedStudyError:
                return optuna.load_study(study_name="tune", storage=storage, sampler=sampler_of(args, None),
                                         pruner=pruner_of(args)), False
        except Exception as e:  # noqa: BLE001 (a bad URL, an unreadable or garbage file: one line)
            if type(e).__name__ in ("IntegrityError", "OperationalError") and attempt < 4 and "disk" not in str(e):
                time.sleep(0.5 + random.random())
                continue
            raise Refused(f"cannot open the study's storage {storage_name(args)}: {str(e).splitlines()[0]}") from None


def check_settings(args, study):
    record = settings_record(args)
    stored = study.user_attrs.get("settings")
    if stored is None:
        study.set_user_attr("settings", record)
    elif stored != record:
        differ = ", ".join(k for k in record if stored.get(k) != record[k])
        raise Refused(f"{args.out} holds a study with other settings ({differ}); use another --out, or the same command")


def open_study(args):
    db = os.path.join(args.out, "study.db")
    if args.report and not args.storage and not os.path.exists(db):
        raise Refused(f"no study in {args.out} (no study.db): nothing to report")
    created_dir = not os.path.lexists(args.out)
    claim_directory("tune", args.attnlab, "study", args.out)
    created_db = not args.storage and not os.path.lexists(db)
    created = False
    try:
        study, created = create_or_load(args)
        study.sampler = sampler_of(args, worker_seed(args.study_seed, created))
        check_settings(args, study)
    except BaseException:
        # A refusal leaves nothing of this worker's behind: a study.db it began (one it created, or one
        # left empty) and a directory it made, unless another worker started at the same moment uses them.
        if created_db and os.path.exists(db) and (created or os.path.getsize(db) == 0):
            for path in (db, db + "-journal"):
                if os.path.lexists(path):
                    os.remove(path)
        if created_dir and os.listdir(args.out) == [".attnlab-study"]:
            os.remove(os.path.join(args.out, ".attnlab-study"))
            os.rmdir(args.out)
        raise
    return study


class Worker:
    """Asks the study for trials and runs them, --jobs at a time, until the budget is spent."""

    def __init__(self, args, study):
        self.args, self.study = args, study
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.flags = default_flags(args.fixed, [p.name for p in args.space]) + args.fixed
        self.objective = Objective(args.objective)

    def _budget_left(self, trials):
        done = [t for t in trials if counted(t) or t.state == optuna.trial.TrialState.RUNNING]
        if len(done) >= self.args.trials:
            return False
        cpu = sum(t.user_attrs.get("cpu_seconds", 0) for t in trials)
        if self.args.cpu_budget is not None and cpu >= self.args.cpu_budget:
            return False
        if self.args.sampler == "grid" and not any(t.state == optuna.trial.TrialState.WAITING for t in trials):
            return self._grid_left(trials)
        return True

    def _grid_left(self, trials):
        """Whether some grid point has no finished trial yet (the grid sampler's rule: a running one is not done)."""
        names = list(self.args.grid)
        finished = {tuple(t.params.get(n) for n in names) for t in trials if t.state.is_finished()}
        return any(point not in finished for point in itertools.product(*self.args.grid.values()))

    def _ask(self):
        """A new trial within the budget, with its run directories' name (an interrupted trial queued again
        names its own, to resume), or None. Another worker may have asked at the same moment: a trial
        whose earlier ones already fill the budget is recorded as surplus and not run."""
        with self.lock:
            if self.stop.is_set() or not self._budget_left(self.study.get_trials(deepcopy=False)):
                return None
            trial = self.study.ask()
            params = {p.name: p.suggest(trial) for p in self.args.space}
            before = [t for t in self.study.get_trials(deepcopy=False) if t.number < trial.number and
                      (counted(t) or t.state == optuna.trial.TrialState.RUNNING)]
            if len(before) >= self.args.trials:
                trial.set_user_attr("ended", "surplus")
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                return None
            return trial, params, trial.user_attrs.get("resume_run")

    def _tell(self, trial, params, outcome, base):
        with self.lock:
            for k, v in outcome.attrs.items():
                trial.set_user_attr(k, v)
            if outcome.state == "complete":
                self.study.tell(trial, outcome.value)
            elif outcome.state == "pruned":
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            else:
                trial.set_user_attr("ended", outcome.state)
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            if outcome.state == "interrupted":  # queued again: the resumed study runs this configuration first
                system = {"fixed_params": params}
                own = next(t for t in self.study.get_trials(deepcopy=False) if t.number == trial.number).system_attrs
                system.update({k: own[k] for k in ("grid_id", "search_space") if k in own})
                self.study.add_trial(optuna.trial.create_trial(
                    state=optuna.trial.TrialState.WAITING, system_attrs=system,
                    user_attrs={"retry_of": trial.number, "resume_run": base}))
        line = f"trial {trial.number}: {outcome.state}"
        if outcome.value is not None:
            line += f", objective {outcome.value:g}"
        if outcome.state == "failed":
            line += f" (exit {outcome.attrs.get('exit')}): {outcome.attrs.get('error', '')}"
        print(line + f"  {' '.join(train_flags(params))}", flush=True)

    def loop(self):
        runner = TrialRunner(self.args.attnlab, self.args.out, self.objective, self.args.seeds, self.args.base_seed,
                             self.stop)
        while True:
            asked = self._ask()
            if asked is None:
                return
            trial, params, resume_run = asked
            base = resume_run or run_base(trial.number)
            outcome = runner.run(trial, base, train_flags(params) + self.flags, resume=resume_run is not None)
            self._tell(trial, params, outcome, base)

    def run(self):
        """The --jobs loops; an error in one (a full disk) stops the others' trials, then is raised."""
        errors = []
        with ThreadPoolExecutor(max_workers=self.args.jobs) as pool:
            for f in [pool.submit(self.loop) for _ in range(self.args.jobs)]:
                try:
                    f.result()
                except Exception as e:  # noqa: BLE001 (raised below, once every loop has ended)
                    errors.append(e)
                    self.stop.set()
        if errors:
            raise errors[0]


def main(args):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rank, size = launcher_rank_size()
    study = open_study(args)
    if args.report:
        report(study, args.space, args.objective, args.attnlab, args.out, args.fixed)
        return
    worker = Worker(args, study)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # whatever was inherited
    signal.signal(signal.SIGINT, lambda *_: worker.stop.set())
    signal.signal(signal.SIGTERM, lambda *_: worker.stop.set())
    if rank == 0:
        where = f", {size} workers" if size > 1 else ""
        print(f"tune: {args.sampler} sampler, {args.pruner} pruner, objective {args.objective}, "
              f"{args.trials} trials, {args.jobs} at a time{where}", flush=True)
    worker.run()
    if worker.stop.is_set():
        print("tune: interrupted; the same command resumes the study", file=sys.stderr)
        sys.exit(130)
    if rank == 0:
        while size > 1 and any(t.state == optuna.trial.TrialState.RUNNING for t in study.get_trials(deepcopy=False)):
            time.sleep(1)  # the other ranks' last trials (mpirun ends the job if a rank dies)
        report(study, args.space, args.objective, args.attnlab, args.out, args.fixed)
