"""Files a run writes, and who may write them: `atomic_write`, `hold_lock` (the one lock: run folders, studies,
caches) and `RunLog`. Standard library and filelock only: a run folder is locked before torch is imported."""

from __future__ import annotations

import atexit
import errno
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock, Timeout

from .errors import DiskError

log = logging.getLogger(__name__)

Content = bytes | bytearray | memoryview | str | Callable[[BinaryIO], object]


def atomic_write(path: str | Path, content: Content) -> Path:
    """Write `content` (bytes, text, or a function that writes into the open binary file) to `path` through a
    synced temporary file renamed over it: no reader sees half a file, a failure leaves `path` as it was and no
    temporary file; a full disk is a DiskError naming the folder and its free space."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    data = content.encode() if isinstance(content, str) else content
    try:
        with open(tmp, "xb") as f:  # the umask's permissions, as any new file
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            usage, mib = shutil.disk_usage(path.parent), 1024 * 1024
            size = "" if callable(data) else f" ({len(data) / mib:.2f} MiB)"
            raise DiskError(
                f"no space left to write {path.name}{size} in {path.parent}: {usage.free / mib:.2f} MiB free of "
                f"{usage.total / mib:.1f} MiB; every file already there is complete. Free space there, or run "
                "with paths.log_dir=<a folder on a disk with space>"
            ) from None
        raise
    return path


class Busy(Exception):
    """The lock is held by another live process; `holder` is its process id as it wrote it (or "?")."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by process {holder}")
        self.path, self.holder = path, holder


def hold_lock(path: str | Path, wait: bool = False, until_exit: bool = False) -> FileLock:
    """Take the exclusive lock `path` (the kernel drops it when the process ends, even on `kill -9`). Held by
    another process: Busy at once, or with `wait` say once who holds it and wait. The holder's id goes to
    `<path>.pid`, for the messages. `until_exit`: released when this process exits."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=-1 if wait else 0)
    owner = path.with_name(path.name + ".pid")
    waited = False
    try:
        lock.acquire(timeout=0)
    except Timeout:
        holder = _holder(owner)
        if not wait:
            raise Busy(path, holder or "?") from None
        who = f"process {holder}" if holder else "another process"
        log.info("%s is held by %s: this run waits until that process lets go of it", path, who)
        lock.acquire(timeout=-1)
        waited = True
    previous = _read(owner)
    if previous and previous != str(os.getpid()) and not waited:
        log.info("%s: took over the stale lock of process %s (no longer running)", path.parent, previous)
    owner.write_text(f"{os.getpid()}\n")
    if until_exit:
        atexit.register(release_lock, lock)
    return lock


def release_lock(lock: FileLock) -> None:
    """Let go of a lock `hold_lock` took, and its `.pid` file (the lock file stays: one removed under a waiting
    process would let a third take a second lock on a new file)."""
    if not lock.is_locked:
        return
    path = Path(lock.lock_file)
    path.with_name(path.name + ".pid").unlink(missing_ok=True)
    lock.release(force=True)


def holder_of(path: str | Path) -> str | None:
    """The process holding the lock `path` now (its id, or "?"), None when none does; makes or writes no file."""
    path = Path(path)
    if not path.is_file():
        return None
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return _holder(path.with_name(path.name + ".pid")) or "?"
    lock.release(force=True)
    return None


def _holder(owner: Path, patience: float = 1.0) -> str:
    """The process id in `owner`, waiting up to `patience` seconds for a holder that just took the lock."""
    deadline = time.monotonic() + patience
    while not (holder := _read(owner)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return holder


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def run_dir_of(ckpt_path: str | Path | None) -> Path | None:
    """The run folder `<run>` of a checkpoint at `<run>/checkpoints/*.ckpt`, if it is a Hydra run folder."""
    if not ckpt_path:
        return None
    p = Path(str(ckpt_path)).expanduser().resolve()
    run = p.parent.parent
    if p.is_file() and p.parent.name == "checkpoints" and (run / ".hydra").is_dir():
        return run
    return None


def resumed_in_place(ckpt_path: str | Path | None, output_dir: str | Path) -> bool:
    """Whether a run in `output_dir` resumes `ckpt_path` inside the run folder that wrote it."""
    run = run_dir_of(ckpt_path)
    return run is not None and run == Path(output_dir).resolve()


def shown(path: str | Path) -> str:
    """`path` relative to the working directory when it lies under it, else as it is."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


class RunLog(logging.FileHandler):
    """A run's log file (conf/hydra/default.yaml) that holds its records back until the run owns its folder
    (`start_run_log`): a run refused before that writes nothing into another run's folder (`drop_run_log`); one
    that ends otherwise, a crash included, writes what it held when its log closes."""

    def __init__(self, filename: str, mode: str = "a", encoding: str | None = None, errors: str | None = None) -> None:
        super().__init__(filename, mode=mode, encoding=encoding, delay=True, errors=errors)
        self.held: list[logging.LogRecord] | None = []  # None: started, records go to the file
        self.dropped = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.held is None:
            super().emit(record)
        elif not self.dropped:
            self.held.append(record)

    def start(self) -> None:
        held, self.held = self.held or [], None
        if self.stream is None:
            self.stream = self._open()  # the file exists from here, as a FileHandler's does, lines or not
        for record in held:
            super().emit(record)

    def drop(self) -> None:
        self.held, self.dropped = [], True

    def close(self) -> None:
        if self.held and not self.dropped:
            self.start()
        super().close()


def start_run_log() -> None:
    """From now on the run's log goes to its file, beginning with what was held back (idempotent)."""
    for handler in _run_logs():
        handler.start()


def drop_run_log() -> None:
    """The run was refused: what its log held back is never written."""
    for handler in _run_logs():
        handler.drop()


def _run_logs() -> list[RunLog]:
    return [h for h in logging.getLogger().handlers if isinstance(h, RunLog)]
