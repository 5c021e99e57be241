"""A run folder's life: locked while a run writes to it, removed when the run stopped before doing any work.

The lock is the Optuna sweep's kind (sweeps.lock_study): an exclusive `flock` on a file in the folder,
holding the process id for the message. The kernel releases it when the process ends, even on
`kill -9`, so a lock left by a dead run is stale by construction: the next run takes it and says so.
Standard library only (the entry points take it before torch is imported).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import time
from pathlib import Path
from typing import IO

from .errors import CheckpointError

log = logging.getLogger(__name__)

LOCK_NAME = ".run.lock"
STARTED = time.time()  # when this process imported us: before Hydra made the run folder
WORK = ("*.ckpt", "events.out.tfevents.*")  # what a run that did some work leaves


class RunDirBusy(CheckpointError):
    """The run folder is held by another live run."""


def lock_run_dir(folder: str | Path) -> IO[str] | None:
    """Hold `<folder>/.run.lock` until this process ends (released at exit); a folder another live process
    holds is a CheckpointError naming that process. Returns the open lock file (None without `flock`)."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        return None
    path = Path(folder) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+")  # noqa: SIM115 - held open on purpose
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise RunDirBusy(
                f"run folder {Path(folder)} is in use by process {holder}, which is writing to it now (a run "
                f"resumed there, or a training): wait for it to end, or stop it (kill {holder}); two runs in one "
                f"folder would write the same checkpoints and TensorBoard steps"
            ) from None
        if path.exists() and os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
            break  # not a file the last holder removed while we opened it
        handle.close()
    handle.seek(0)
    previous = handle.read().strip()
    if previous and previous != str(os.getpid()):
        log.info("run folder %s: took over the stale lock of process %s (no longer running)", folder, previous)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    atexit.register(release, handle, path)
    return handle


def release(handle: IO[str], path: Path) -> None:
    """Remove the lock file and let go of it (what exit would do, minus the file)."""
    if handle.closed:
        return
    try:
        path.unlink(missing_ok=True)
    finally:
        handle.close()


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
    if check_work and any(p.match(pattern) and p.stat().st_mtime >= since for p in files for pattern in WORK):
        return False
    if own and all(p.stat().st_mtime >= since for p in files):
        shutil.rmtree(folder, ignore_errors=True)
        return True
    sub = folder / subdir if subdir else None
    if sub and sub.is_dir() and sub != folder and all(p.stat().st_mtime >= since for p in sub.rglob("*")):
        shutil.rmtree(sub, ignore_errors=True)
        return True
    return False
