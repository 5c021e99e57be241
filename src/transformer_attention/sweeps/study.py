"""An Optuna study's life across launches: its SQLite file, the lock that keeps a second launch out, the
overrides it was started with, and the trials a stopped launch left RUNNING."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from filelock import FileLock
from optuna.trial import TrialState

from ..files import Busy, hold_lock

log = logging.getLogger(__name__)

OVERRIDES_ATTR = "task_overrides"  # the command-line overrides that started the study
INTERRUPTED_ATTR = "interrupted_trials"  # trials left RUNNING by a stopped launch, marked FAIL on resume
RESULTS_FILE = "optimization_results.yaml"


class SweepError(RuntimeError):
    """A sweep that cannot start or resume; the message says why and what to do."""


def sqlite_path(storage: Any) -> Path | None:
    """The database file of a `sqlite:///<path>` storage URL, else None."""
    if isinstance(storage, str) and storage.startswith("sqlite:///"):
        return Path(storage[len("sqlite:///") :])
    return None


def lock_study(folder: Path, study_name: str) -> FileLock:
    """Hold an exclusive lock on the study's folder for this process's lifetime (released on exit,
    even on a kill), so a second launch of the same study fails instead of mixing trials."""
    try:
        return hold_lock(folder / ".optuna.lock", until_exit=True)
    except Busy as busy:
        raise SweepError(
            f"study {study_name!r} in {folder} is being run by another launch (process {busy.holder}): wait for "
            f"it, or start a separate study with hydra.sweeper.study_name=<new name>"
        ) from None


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


def ended(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Trials that ran to an end (complete, pruned or failed), not interrupted ones."""
    interrupted = set(study.user_attrs.get(INTERRUPTED_ATTR, []))
    return [t for t in study.get_trials(deepcopy=False) if t.state.is_finished() and t.number not in interrupted]
