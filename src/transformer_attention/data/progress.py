"""Progress of long work: a tqdm bar where stderr is a terminal; elsewhere (a log file, CI, a sweep's job, where a
bar's carriage returns pile up) log lines at the start, at least every `EVERY_S` seconds, and at the end."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from tqdm import tqdm

log = logging.getLogger(__name__)

EVERY_S = 30.0  # the longest a step goes without a line where stderr is not a terminal


class LogProgress:
    """The log lines that stand for a bar: `desc: 25,000 texts`, `desc: 12,000 of 25,000 texts, 31 s`, `desc:
    25,000 texts in 64 s`."""

    def __init__(self, total: int, desc: str, unit: str) -> None:
        self.total, self.desc, self.unit, self.every_s = total, desc, unit, EVERY_S
        self.done, self.start = 0, time.perf_counter()
        self.last, self.closed = self.start, False
        log.info("%s: %s", desc, self._count(total))

    def _count(self, n: int) -> str:
        return f"{n:,} {self.unit}{'' if n == 1 else 's'}"

    def update(self, n: float = 1) -> None:
        self.done += int(n)
        now = time.perf_counter()
        if now - self.last >= self.every_s and self.done < self.total:
            self.last, done = now, f"{self.done:,}"
            log.info("%s: %s of %s, %.0f s", self.desc, done, self._count(self.total), now - self.start)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            log.info("%s: %s in %.1f s", self.desc, self._count(self.done), time.perf_counter() - self.start)

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Silent:
    """No progress shown: a short job."""

    def update(self, n: float = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def progress(total: int, desc: str, unit: str, *, show: bool = True) -> tqdm[Any] | LogProgress | Silent:
    """A tqdm bar where stderr is a terminal, else `LogProgress`; nothing when not `show` (a short job)."""
    if not show:
        return Silent()
    if sys.stderr.isatty():
        return tqdm(total=total, desc=desc, unit=unit)
    return LogProgress(total, desc, unit)
