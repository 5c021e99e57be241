"""A run folder has one owner; a run refused before any work leaves nothing behind. `RunFolderCheck`, a Hydra
callback, runs before Hydra makes the run folder and refuses, in one line: a folder setting that is a file or can't
be written, a run folder holding files (but a resume of its own run, a DDP rank in rank 0's), one another live run
holds (`.run.lock`: the kernel drops it even on `kill -9`), a sweep's folder holding another sweep."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ..errors import CheckpointError, ConfigError, UserError
from ..files import Busy, hold_lock, holder_of, release_lock, resumed_in_place

LOCK_NAME = ".run.lock"
LOCK_FILES = (LOCK_NAME, f"{LOCK_NAME}.pid")  # the lock's own files: no run's results
WORK = ("*.ckpt", "events.out.tfevents.*")  # what a run that did some work leaves


class RunDirBusy(CheckpointError):
    """The run folder is held by another live run."""

    def __init__(self, folder: Path, holder: str) -> None:
        super().__init__(
            f"run folder {folder} is in use by process {holder}, which is writing to it now (a run resumed there, "
            f"or a training): wait for it to end, or stop it (kill {holder}); two runs in one folder would write "
            "the same checkpoints and TensorBoard steps"
        )


class RunFolderCheck(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not is_rank_zero():
            return  # a DDP rank Lightning starts runs the command again, in rank 0's folder: its own run
        refuse_files(config, run_key="hydra.run.dir")
        run_dir, resumable = Path(str(config.hydra.run.dir)), config.hydra.job.name in ("train", "pretrain")
        resumes = resumable and resumed_in_place(config.get("ckpt_path"), run_dir)
        claim_or_exit(run_dir, fresh=not resumes, resume_hint=resumable)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_files(config, run_key="hydra.sweep.dir")
        sweep = Path(str(config.hydra.sweep.dir))
        if str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).endswith("OptunaSweeper"):
            return
        if not (sweep / "multirun.yaml").is_file():
            claim_or_exit(sweep)  # before the sweep's multirun.yaml and jobs: a second sweep into it is refused
        if (sweep / "multirun.yaml").is_file():  # another sweep's, there before or written before the lock
            raise SystemExit(
                f"config error: hydra.sweep.dir={sweep} holds another sweep (its multirun.yaml): a new sweep "
                "never writes over its jobs; leave hydra.sweep.dir unset (a new folder under outputs/) or pick "
                "another one"
            )


def refuse_files(config: DictConfig, run_key: str) -> None:
    """A folder setting that names a file, or a folder this process cannot write: refused before anything is made,
    naming the setting and a folder that can be written."""
    caches = () if config.hydra.job.name == "predict" else ("paths.cache_dir",)  # predict.py caches nothing
    for key in ("paths.log_dir", *caches, run_key):
        if (value := OmegaConf.select(config, key, default=None)) is None:
            continue
        if (folder := Path(str(value))).is_file():
            raise SystemExit(f"config error: {key}={value} is a file, not a folder: give a folder there")
        existing = next(p for p in (folder.absolute(), *folder.absolute().parents) if p.exists())
        if existing.is_dir() and not os.access(existing, os.W_OK | os.X_OK):
            why = f"no permission to write in {existing}"
            if os.statvfs(existing).f_flag & os.ST_RDONLY:
                why = f"{existing} is on a read-only file system"
            name = folder.name + (time.strftime("-%Y%m%d-%H%M%S") if key == run_key else "")  # a new run folder
            fix = f"{key}={Path(tempfile.gettempdir()) / 'transformer-attention' / name}"
            why = f"{key}={value} cannot be written ({why})"
            raise SystemExit(f"disk error: {why}: give a folder that can, e.g. {fix}")


@dataclass
class Claim:
    """A folder this process holds: what it made, and the paths and work files (mtimes in ns) there at the lock."""

    folder: Path
    lock: FileLock
    made: list[Path]
    before: frozenset[Path]
    work: dict[Path, int]


CLAIMS: dict[Path, Claim] = {}  # the folders this process holds, by absolute path


def claim_or_exit(folder: Path, fresh: bool = False, resume_hint: bool = False) -> None:
    try:
        claim_run_dir(folder, fresh=fresh, resume_hint=resume_hint)
    except UserError as err:
        raise SystemExit(f"{err.kind}: {err}") from None


def claim_run_dir(folder: str | Path, fresh: bool = False, resume_hint: bool = False) -> Claim:
    """Hold `folder`'s lock until this process ends (idempotent), making the folder if needed: RunDirBusy where
    another live process holds it; with `fresh` (not a resume of its run), a ConfigError where it holds any file
    (`resume_hint`: naming the resume command). A refused claim writes nothing."""
    folder = Path(os.path.abspath(folder))
    if folder in CLAIMS:
        return CLAIMS[folder]
    if fresh and _others(folder):
        holder = holder_of(folder / LOCK_NAME)
        raise RunDirBusy(folder, holder) if holder else ConfigError(taken_message(folder, resume_hint))
    made = [p for p in (*reversed(folder.parents), folder, folder / LOCK_NAME) if not p.exists()]
    try:
        lock = hold_lock(folder / LOCK_NAME, until_exit=True)
    except Busy as busy:
        raise RunDirBusy(folder, busy.holder) from None  # its holder's folder: nothing removed
    if fresh and _others(folder):  # a run that ended between the look and the lock
        release_lock(lock)
        raise ConfigError(taken_message(folder, resume_hint))
    CLAIMS[folder] = Claim(folder, lock, made, frozenset(folder.rglob("*")), _work_files(folder))
    return CLAIMS[folder]


def taken_message(folder: Path, resume_hint: bool) -> str:
    held = sorted(p.name for p in _others(folder))[:4]
    last = folder / "checkpoints" / "last.ckpt"
    resume = f", or resume that run: ckpt_path={last}" if resume_hint and last.is_file() else ""
    return (
        f"run folder {folder} holds another run's files ({', '.join(held)}, ...): a new run never writes into it; "
        f"leave hydra.run.dir unset (a new folder under outputs/), pick an empty folder{resume}"
    )


def is_rank_zero() -> bool:
    """Not a DDP rank > 0 (they run the same command in rank 0's folder), read as Lightning does, without it."""
    keys = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
    return all(os.environ.get(k, "0").strip() in ("", "0") for k in keys)


def give_up(folder: str | Path) -> bool:
    """Remove what this run made in `folder`, where it did no work (no checkpoint or TensorBoard event new or
    changed): the paths that appeared while it held the lock, then the folders it created while empty; True if any.
    """
    claim = CLAIMS.get(Path(os.path.abspath(folder)))
    if claim is None or any(claim.work.get(p) != t for p, t in _work_files(claim.folder).items()):
        return False
    lock_files = {claim.folder / name for name in LOCK_FILES}
    new = [p for p in claim.folder.rglob("*") if p not in claim.before and p not in lock_files]
    if claim.folder / LOCK_NAME in claim.made:  # removed while held: a waiting process sees it gone, looks again
        new.append(claim.folder / LOCK_NAME)
    for path in sorted(new, key=lambda p: len(p.parts), reverse=True):  # deepest first: a folder after its files
        _remove(path)
    release_lock(claim.lock)
    del CLAIMS[claim.folder]
    for path in reversed(claim.made):
        _remove(path)
    return bool(new) or bool(claim.made)


def _remove(path: Path) -> None:
    """Remove a file, or a folder that is empty; leave anything else (a folder another process wrote into)."""
    with contextlib.suppress(OSError):
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()


def _others(folder: Path) -> list[Path]:
    """What `folder` holds besides the lock's own files (nothing when it does not exist)."""
    return [p for p in folder.iterdir() if p.name not in LOCK_FILES] if folder.is_dir() else []


def _work_files(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for pattern in WORK for p in folder.rglob(pattern) if p.is_file()}
