"""Pretraining results kept between runs in `<paths.cache_dir>/pretrained/<method>-<key><suffix>`, one lock per
key (a parallel sweep's jobs make it once), written atomically; one that does not read is set aside, made again."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..data import cache
from ..errors import DiskError
from ..files import atomic_write, hold_lock, release_lock
from .start import Start, read_start

log = logging.getLogger(__name__)


def cached_path(cache_dir: str | Path, method: str, parts: tuple, texts: Sequence[str], suffix: str) -> Path:
    """The cache file of a result of `method` that depends on `parts` and `texts`."""
    key = cache.fingerprint(method, *parts, texts=texts)
    return Path(cache_dir) / "pretrained" / f"{method}-{key}{suffix}"


@contextmanager
def locked(cached: Path) -> Iterator[None]:
    """Hold `cached`'s lock (waiting for the process that holds it) while the body reads or makes it."""
    lock = hold_lock(cached.with_suffix(".lock"), wait=True)
    try:
        yield
    finally:
        release_lock(lock)


def fetch(cached: Path) -> Start | None:
    """The result cached at `cached`, or None if there is none or it fails to load (then it is set aside)."""
    return cache.read_cached(cached, lambda _: read_start(cached))


def keep(made: Path, cached: Path) -> None:
    """Copy `made` to `cached`, atomically; a full disk is a DiskError naming the run's own file, and how to start
    from it."""
    try:
        with open(made, "rb") as src:
            atomic_write(cached, lambda f: shutil.copyfileobj(src, f))
    except DiskError as err:
        kept = Path(made).resolve()
        raise DiskError(
            f"{err}. The pretraining's result was not cached, but the pretraining's own checkpoint is kept: {kept}; "
            f"start from it with model.init_from={kept} (or cache it elsewhere: paths.cache_dir=<a folder with space>)"
        ) from None
