"""A run folder's life: locked while a run writes to it, removed when the run stopped before doing any work.

The lock is `files.hold_lock` on `<folder>/.run.lock`: the kernel releases it when the process ends, even on
`kill -9`, so a lock left by a dead run is stale by construction: the next run takes it and says so.
Standard library only (the entry points take it before torch is imported).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from filelock import FileLock

from ..errors import CheckpointError
from ..files import Busy, hold_lock

LOCK_NAME = ".run.lock"
STARTED = time.time()  # when this process imported us: before Hydra made the run folder
WORK = ("*.ckpt", "events.out.tfevents.*")  # what a run that did some work leaves
HELD: dict[Path, dict[str, int]] = {}  # a folder this process locked -> its work files then (path -> mtime in ns)


class RunDirBusy(CheckpointError):
    """The run folder is held by another live run."""


def lock_run_dir(folder: str | Path) -> FileLock:
    """Hold `<folder>/.run.lock` until this process ends; a folder another live process holds is a
    RunDirBusy (a CheckpointError) naming that process."""
    try:
        lock = hold_lock(Path(folder) / LOCK_NAME, until_exit=True)
        HELD[Path(folder).resolve()] = _work_files(Path(folder))  # what was there before this run did anything
        return lock
    except Busy as busy:
        raise RunDirBusy(
            f"run folder {Path(folder)} is in use by process {busy.holder}, which is writing to it now (a run "
            f"resumed there, or a training): wait for it to end, or stop it (kill {busy.holder}); two runs in one "
            f"folder would write the same checkpoints and TensorBoard steps"
        ) from None


def is_rank_zero() -> bool:
    """Not a DDP rank > 0 (they run the same command in the same folder): the environment variables
    Lightning reads for the rank, read without importing it."""
    keys = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
    return all(os.environ.get(k, "0").strip() in ("", "0") for k in keys)


def discard_unused(folder: str | Path, own: bool, subdir: str | Path | None = None, check_work: bool = True) -> bool:
    """After a run stopped before any work (no checkpoint, no TensorBoard event written since it started),
    remove what it wrote: the whole `folder` when it is the run's `own` new folder and holds nothing older
    than the run, else only its Hydra config `subdir` (`.hydra/resume_<time>` of a resumed run). True if
    something was removed. A folder holding any work (unless `check_work` is False: the run surely did
    none), or anything the run did not write, is left alone."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    since = STARTED - 2.0  # file times come from a coarser clock than time.time()
    files = [p for p in folder.rglob("*") if p.is_file()]
    if check_work and _worked(folder, since):
        return False
    if own and all(p.stat().st_mtime >= since for p in files):
        shutil.rmtree(folder, ignore_errors=True)
        return True
    sub = folder / subdir if subdir else None
    if sub and sub.is_dir() and sub != folder and all(p.stat().st_mtime >= since for p in sub.rglob("*")):
        shutil.rmtree(sub, ignore_errors=True)
        return True
    return False


def _work_files(folder: Path) -> dict[str, int]:
    """The work files (WORK) under `folder` and their modification times in ns."""
    return {str(p): p.stat().st_mtime_ns for pattern in WORK for p in folder.rglob(pattern) if p.is_file()}


def _worked(folder: Path, since: float) -> bool:
    """Whether this run wrote a work file in `folder`: one that is new or changed since the run locked it (exact,
    whatever the file system's clock), else, for a folder it never locked, one modified after `since`. The time
    rule alone misread a run that ended a second before this one started as this run's work."""
    before = HELD.get(folder.resolve())
    now = _work_files(folder)
    if before is not None:
        return any(before.get(path) != mtime for path, mtime in now.items())
    return any(mtime >= since * 1e9 for mtime in now.values())
