"""Optuna sweeps that survive being stopped: hydra-optuna-sweeper's sweeper plus resuming.

hydra-optuna-sweeper 1.3 (optuna 2.x) keeps a study in SQLite, but started again it would: fail
because the database's folder does not exist yet; re-propose the first trials (a seeded sampler
starts from the same seed); run `n_trials` more trials instead of the missing ones; and number the
new jobs from 0, over the first launch's folders. `ResumableOptunaSweeperImpl` fixes all four;
Hydra reaches it through `hydra_plugins.transformer_attention_sweeper.ResumableOptunaSweeper`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.types import HydraContext, TaskFunction
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from .compat import OptunaSweeperBase

log = logging.getLogger(__name__)

OVERRIDES_ATTR = "task_overrides"  # the command-line overrides that started the study
INTERRUPTED_ATTR = "interrupted_trials"  # trials left RUNNING by a stopped launch, marked FAIL on resume


class SweepError(RuntimeError):
    """A sweep that cannot start or resume; the message says why and what to do."""


def sqlite_path(storage: Any) -> Path | None:
    """The database file of a `sqlite:///<path>` storage URL, else None."""
    if isinstance(storage, str) and storage.startswith("sqlite:///"):
        return Path(storage[len("sqlite:///") :])
    return None


def lock_study(folder: Path, study_name: str) -> Any:
    """Hold an exclusive lock on the study's folder for this process's lifetime (released on exit,
    even on a kill), so a second launch of the same study fails instead of mixing trials."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        return None
    handle = open(folder / ".optuna.lock", "a+")  # noqa: SIM115 - held open on purpose
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise SweepError(
            f"study {study_name!r} in {folder} is being run by another launch: wait for it, or start "
            f"a separate study with hydra.sweeper.study_name=<new name>"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def check_overrides(study: optuna.Study, overrides: Sequence[str]) -> None:
    """Record the launch's task overrides in a new study; refuse to resume one started with others."""
    overrides = sorted(overrides)
    recorded = study.user_attrs.get(OVERRIDES_ATTR)
    if recorded is None:
        study.set_user_attr(OVERRIDES_ATTR, overrides)
    elif recorded != overrides:
        before, now = sorted(set(recorded) - set(overrides)), sorted(set(overrides) - set(recorded))
        raise SweepError(
            f"study {study.study_name!r} was started with other overrides (only then: {before}, only now: {now}): "
            "run the same command to resume it, or pass hydra.sweeper.study_name=<new name> for a new study"
        )


def fail_interrupted(study: optuna.Study) -> list[int]:
    """Mark trials still RUNNING (their launch was stopped: the lock says none is running now) as FAIL."""
    stale = [t.number for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
    for number in stale:
        study.tell(number, state=TrialState.FAIL)
    if stale:
        study.set_user_attr(INTERRUPTED_ATTR, sorted({*study.user_attrs.get(INTERRUPTED_ATTR, []), *stale}))
        log.warning("trials %s were interrupted by a stopped launch: marked FAIL, run again", stale)
    return stale


def trials_done(study: optuna.Study) -> int:
    """Trials that ran to an end (complete, pruned or failed), not counting interrupted ones."""
    interrupted = set(study.user_attrs.get(INTERRUPTED_ATTR, []))
    return sum(t.state.is_finished() and t.number not in interrupted for t in study.get_trials(deepcopy=False))


class ResumableOptunaSweeperImpl(OptunaSweeperBase):
    """`n_trials` is the study's total: a launch runs only the trials still missing, numbered on from
    the study's, with the sampler seeded past the trials it already proposed."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.sampler_config = config.hydra.sweeper.get("sampler")
        self.task_overrides = list(config.hydra.overrides.task)

    def sweep(self, arguments: list[str]) -> None:
        try:
            self._sweep(arguments)
        except SweepError as err:
            raise SystemExit(f"sweep error: {err}") from None

    def _sweep(self, arguments: list[str]) -> None:
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        db = sqlite_path(self.storage)
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)  # SQLite creates the file, not its folder
        if self.storage is not None and self.study_name is None:
            raise SweepError("a stored study needs a name: set hydra.sweeper.study_name")
        self._lock = lock_study(sweep_dir, str(self.study_name))
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        study = optuna.create_study(
            study_name=self.study_name, storage=self.storage, directions=self.study_directions(), load_if_exists=True
        )
        check_overrides(study, self.task_overrides)
        fail_interrupted(study)
        done, total = trials_done(study), self.n_trials
        self.n_trials = max(0, total - done)
        self.job_idx = len(study.trials)  # folders are numbered on, never over the earlier ones
        seed = self.sampler_config.get("seed") if self.sampler_config is not None else None
        if seed is not None and len(study.trials):
            # the same seed again would re-propose the first trials: step it past the ones already asked
            self.sampler = instantiate(self.sampler_config, seed=seed + len(study.trials))
        if done:
            log.info("resuming study %r: %d of %d trials done, %d to go", study.study_name, done, total, self.n_trials)
        try:
            super().sweep(arguments)
        except ValueError as err:
            if any(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False)):
                raise
            raise SweepError(
                f"no trial of study {study.study_name!r} completed ({err}); every trial's log is in {sweep_dir}"
            ) from None

    def first_job_number(self, trials: list[optuna.trial.Trial]) -> int:
        """Job number = trial number: the job's folder is the trial's, whatever ran before."""
        return trials[0].number
