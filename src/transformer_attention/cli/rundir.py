"""A run folder's life: claimed (its lock held) before anything is written into it, and on a refusal before any
work, cleared of what this run made, and of nothing else.

The lock is `files.hold_lock` on `<folder>/.run.lock`: the kernel releases it when the process ends, even on
`kill -9`, so a lock left by a dead run is stale by construction: the next run takes it and says so. A run claims
its folder before Hydra makes it and writes `.hydra/` and its log there (cli/owner.py), so of two runs started into
one folder at once, the one that gets the lock runs and the other is refused having written nothing. What a
refused run takes away is decided by what it made (the folders it created, the paths that appeared while it held
the lock), never by file times. Standard library and filelock only (taken before torch is imported).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ..errors import CheckpointError, ConfigError
from ..files import Busy, hold_lock, holder_of, release_lock

LOCK_NAME = ".run.lock"
LOCK_FILES = (LOCK_NAME, f"{LOCK_NAME}.pid")  # the lock's own files: no run's results
WORK = ("*.ckpt", "events.out.tfevents.*")  # what a run that did some work leaves


class RunDirBusy(CheckpointError):
    """The run folder is held by another live run."""


class RunDirTaken(ConfigError):
    """The run folder holds another run's files, and this run does not resume that run."""


@dataclass
class Claim:
    """A folder this process holds: what it created for it (the folders, outermost first, and the lock file), every
    path under it and every work file (with its modification time in ns) when the lock was taken."""

    folder: Path
    lock: FileLock
    made: list[Path]
    before: frozenset[Path]
    work: dict[Path, int]


CLAIMS: dict[Path, Claim] = {}  # the folders this process holds, by absolute path


def claim_run_dir(folder: str | Path, fresh: bool = False, resume_hint: bool = False) -> Claim:
    """Hold `folder`'s lock until this process ends (idempotent), making the folder if needed. A folder another live
    process holds is a RunDirBusy naming it; with `fresh` (a new run, not a resume of that folder's run), a folder
    that holds any file but the lock's is a RunDirTaken (`resume_hint`: it names the resume command). A refused
    claim writes nothing: a busy folder is its holder's, and a taken one is looked at before any file is made."""
    folder = Path(os.path.abspath(folder))
    if folder in CLAIMS:
        return CLAIMS[folder]
    if fresh and _others(folder):
        if holder := holder_of(folder / LOCK_NAME):
            raise RunDirBusy(busy_message(folder, holder))
        raise RunDirTaken(taken_message(folder, resume_hint))
    made = [p for p in (*reversed(folder.parents), folder, folder / LOCK_NAME) if not p.exists()]
    try:
        lock = hold_lock(folder / LOCK_NAME, until_exit=True)
    except Busy as busy:
        raise RunDirBusy(busy_message(folder, busy.holder)) from None  # its holder's folder: nothing removed
    if fresh and _others(folder):  # a run that ended between the look and the lock
        release_lock(lock)
        raise RunDirTaken(taken_message(folder, resume_hint))
    claim = Claim(folder, lock, made, frozenset(folder.rglob("*")), _work_files(folder))
    CLAIMS[folder] = claim
    return claim


def lock_run_dir(folder: str | Path) -> FileLock:
    """Hold `<folder>/.run.lock` until this process ends (`claim_run_dir` of a folder that may hold files)."""
    return claim_run_dir(folder).lock


def busy_message(folder: Path, holder: str) -> str:
    return (
        f"run folder {folder} is in use by process {holder}, which is writing to it now (a run "
        f"resumed there, or a training): wait for it to end, or stop it (kill {holder}); two runs in one "
        f"folder would write the same checkpoints and TensorBoard steps"
    )


def taken_message(folder: Path, resume_hint: bool = False) -> str:
    """Why a new run may not write into `folder`, and what to do instead."""
    held = sorted(p.name for p in folder.iterdir() if p.name not in LOCK_FILES)[:4]
    last = folder / "checkpoints" / "last.ckpt"
    resume = f", or resume that run: ckpt_path={last}" if resume_hint and last.is_file() else ""
    return (
        f"run folder {folder} holds another run's files ({', '.join(held)}, ...): a new run never writes into it; "
        f"leave hydra.run.dir unset (a new folder under outputs/), pick an empty folder{resume}"
    )


def is_rank_zero() -> bool:
    """Not a DDP rank > 0 (they run the same command in the same folder): the environment variables
    Lightning reads for the rank, read without importing it."""
    keys = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
    return all(os.environ.get(k, "0").strip() in ("", "0") for k in keys)


def give_up(folder: str | Path) -> bool:
    """After this run was refused before any work (no checkpoint or TensorBoard event new or changed since it took
    the lock), remove what it made in `folder`: the paths that appeared there while it held the lock, then the lock
    file and the folders it created for it (the run folder, its parents), those while they are empty. True if
    something was removed. Nothing else is touched: not a folder it did not claim, not a path that was there
    before, not a folder that holds anything it did not make."""
    claim = CLAIMS.get(Path(os.path.abspath(folder)))
    if claim is None or any(claim.work.get(p) != t for p, t in _work_files(claim.folder).items()):
        return False
    lock_files = {claim.folder / name for name in LOCK_FILES}
    new = [p for p in claim.folder.rglob("*") if p not in claim.before and p not in lock_files]
    for path in sorted(new, key=lambda p: len(p.parts), reverse=True):  # deepest first: a folder after its files
        _remove(path)
    if claim.folder / LOCK_NAME in claim.made:
        (claim.folder / LOCK_NAME).unlink(missing_ok=True)  # while held: a waiting process sees it gone, looks again
    release_lock(claim.lock)
    del CLAIMS[claim.folder]
    for path in reversed(claim.made):
        _remove(path)
    return bool(new) or bool(claim.made)


def _remove(path: Path) -> None:
    """Remove a file, or a folder that is empty; leave anything else (a folder another process wrote into)."""
    try:
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    except OSError:
        pass


def _others(folder: Path) -> list[Path]:
    """What `folder` holds besides the lock's own files (nothing when it does not exist)."""
    return [p for p in folder.iterdir() if p.name not in LOCK_FILES] if folder.is_dir() else []


def _work_files(folder: Path) -> dict[Path, int]:
    """The work files (WORK) under `folder` and their modification times in ns."""
    return {p: p.stat().st_mtime_ns for pattern in WORK for p in folder.rglob(pattern) if p.is_file()}
