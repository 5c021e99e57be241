"""Optuna sweeps on Optuna's ask-and-tell API, behind Hydra's `Sweeper` interface: one Hydra job per trial (trial
N's folder is `<sweep>/N`), with any launcher, told back COMPLETE, PRUNED (by the job's pruning callback) or FAIL.
A stored study survives being stopped: the same command runs only the missing trials."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import optuna
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from ..checks import is_finite, is_whole
from ..errors import JobFailed
from ..files import atomic_write
from .space import search_space, trial_overrides
from .study import (
    RESULTS_FILE,
    SweepError,
    check_overrides,
    ended,
    fail_interrupted,
    lock_study,
    sqlite_path,
)

log = logging.getLogger(__name__)

Direction = Literal["minimize", "maximize"]


class StudySweeper(Sweeper):
    """The settings are `OptunaSweeperConf`'s (hydra_plugins); `n_trials` is the study's total."""

    config: DictConfig  # set by `setup`, which Hydra calls before `sweep`
    launcher: Launcher

    def __init__(
        self,
        *,
        storage: str | None,
        study_name: str | None,
        n_trials: int,
        n_jobs: int,
        direction: Direction | Sequence[Direction],
        max_failure_rate: float,
        sampler: Mapping[str, Any] | None,
        pruner: Mapping[str, Any] | None,
        params: Mapping[str, Any] | None,
        enqueue_trials: Sequence[Any],
    ) -> None:
        self.storage, self.study_name = storage, study_name
        self.n_trials, self.n_jobs, self.max_failure_rate = n_trials, max(1, n_jobs), max_failure_rate
        self.directions: list[Direction] = [direction] if isinstance(direction, str) else list(direction)
        self.sampler_config, self.pruner_config = sampler, pruner
        self.params = dict(params or {})
        self.enqueue_trials = [dict(p) for p in enqueue_trials]

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )
        self.task_overrides = list(config.hydra.overrides.task)

    def sweep(self, arguments: list[str]) -> None:
        try:
            self._sweep(arguments)
        except SweepError as err:
            raise SystemExit(f"sweep error: {err}") from None

    def _sweep(self, arguments: list[str]) -> None:
        # what can be wrong with the search is found before its folder or study is made
        if not is_whole(self.n_trials, 1):
            raise SweepError(
                f"hydra.sweeper.n_trials={self.n_trials!r} must be a whole number >= 1 (the study's total, "
                "resumed studies included): e.g. hydra.sweeper.n_trials=20"
            )
        if self.storage is not None and self.study_name is None:
            raise SweepError("a stored study needs a name: set hydra.sweeper.study_name")
        space, fixed = search_space([f"{key}={value}" for key, value in self.params.items()] + list(arguments))
        if not space:
            raise SweepError(
                "nothing to search: give hydra.sweeper.params (or the command line) at least one "
                "choice(...), range(...) or interval(...)"
            )
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if (db := sqlite_path(self.storage)) is not None:
            db.parent.mkdir(parents=True, exist_ok=True)  # SQLite creates the file, not its folder
        self._lock = lock_study(sweep_dir, str(self.study_name))
        atomic_write(sweep_dir / "multirun.yaml", OmegaConf.to_yaml(self.config))

        study = self.open_study()
        check_overrides(study, self.task_overrides)
        fail_interrupted(study)
        if not study.trials:
            for params in self.enqueue_trials:
                study.enqueue_trial(params)
        done = len(ended(study))
        to_go = max(0, self.n_trials - done)
        if done:
            log.info("resuming study %r: %d of %d trials done, %d to go", study.study_name, done, self.n_trials, to_go)
        while to_go > 0:
            batch = [study.ask(fixed_distributions=space) for _ in range(min(self.n_jobs, to_go))]
            to_go -= len(batch)
            self.run_batch(study, batch, fixed)
            self.check_failure_rate(study, sweep_dir)
        self.write_results(study, sweep_dir)

    def open_study(self) -> optuna.Study:
        """Create or load the study, its sampler seeded past the trials it already holds (the same seed
        again would propose the first trials again)."""
        study = optuna.create_study(
            study_name=self.study_name, storage=self.storage, directions=self.directions, load_if_exists=True
        )
        config = self.sampler_config
        seed = config.get("seed") if config is not None else None
        if config is None:
            sampler = optuna.samplers.TPESampler()
        elif seed is not None:
            sampler = instantiate(config, seed=seed + len(study.trials))
        else:
            sampler = instantiate(config)
        pruner = instantiate(self.pruner_config) if self.pruner_config is not None else optuna.pruners.NopPruner()
        if self.storage is None:  # in memory: nothing to resume, a fresh study with the sampler
            return optuna.create_study(study_name=self.study_name, directions=self.directions, sampler=sampler)
        return optuna.load_study(study_name=self.study_name, storage=self.storage, sampler=sampler, pruner=pruner)

    def run_batch(self, study: optuna.Study, batch: list[optuna.trial.Trial], fixed: list[str]) -> None:
        """Launch one job per trial (job number = trial number) and tell the study how each ended."""
        overrides = [trial_overrides(fixed, trial.params) for trial in batch]
        try:
            self.validate_batch_is_legal(overrides)
            returns = self.launcher.launch(overrides, initial_job_idx=batch[0].number)
        except Exception:
            for trial in batch:
                study.tell(trial, state=TrialState.FAIL)
            raise
        for trial, job in zip(batch, returns, strict=True):
            self.tell(study, trial, job)

    def tell(self, study: optuna.Study, trial: optuna.trial.Trial, job: JobReturn) -> None:
        if job.status == JobStatus.COMPLETED:
            value = job.return_value
            if isinstance(value, JobFailed):  # bad input, said in one line by the job (cli/run.py)
                log.error("trial %d failed: %s", trial.number, value)
                study.tell(trial, state=TrialState.FAIL)
                return
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            if len(values) == len(self.directions) and all(is_finite(v) for v in values):
                study.tell(trial, [float(v) for v in values])
                return
            log.error(
                "trial %d returned %r, not %d number(s): recorded as FAIL (set optimized_metric to a logged metric)",
                trial.number,
                value,
                len(self.directions),
            )
            study.tell(trial, state=TrialState.FAIL)
            return
        pruned = {t.number: t for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))}
        if trial.number in pruned:  # told by the job's pruning callback
            log.info("trial %d pruned after epoch %s", trial.number, pruned[trial.number].last_step)
            return
        try:
            job.return_value  # noqa: B018 - raises the job's exception (Hydra writes "Error executing job ..." first)
        except optuna.TrialPruned as pruned:
            log.info("trial %d pruned: %s", trial.number, pruned)
            study.tell(trial, state=TrialState.PRUNED)
        except Exception as err:  # the job's own error: recorded, the sweep goes on
            log.error("trial %d failed: %s: %s", trial.number, type(err).__name__, " ".join(str(err).split()))
            study.tell(trial, state=TrialState.FAIL)

    def check_failure_rate(self, study: optuna.Study, sweep_dir: Path) -> None:
        trials = ended(study)
        failed = sum(t.state == TrialState.FAIL for t in trials)
        if trials and failed / len(trials) > self.max_failure_rate:
            raise SweepError(
                f"{failed} of {len(trials)} trials failed, more than hydra.sweeper.max_failure_rate="
                f"{self.max_failure_rate}: each trial's log is in {sweep_dir}/<trial>/"
            )

    def write_results(self, study: optuna.Study, sweep_dir: Path) -> None:
        """`optimization_results.yaml`: the best parameters and value (each Pareto-optimal trial's when
        there are several directions)."""
        if not any(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False)):
            raise SweepError(f"no trial of study {study.study_name!r} completed; every trial's log is in {sweep_dir}")
        if len(self.directions) == 1:
            results = {"name": "optuna", "best_params": study.best_params, "best_value": study.best_value}
        else:
            solutions = [{"params": t.params, "values": t.values} for t in study.best_trials]
            results = {"name": "optuna", "solutions": solutions}
        atomic_write(sweep_dir / RESULTS_FILE, OmegaConf.to_yaml(OmegaConf.create(results)))
        log.info("best of study %r: %s (%s)", study.study_name, results, sweep_dir / RESULTS_FILE)
