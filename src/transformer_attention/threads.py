"""torch's threads chosen from the load: how many, and OpenMP's wait policy (the comment below says why).
Torch-free: the entry shell decides before torch is imported."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# torch's OpenMP threads (GNU libgomp) spin a while at a barrier before they sleep. Where another process shares
# one of their cores, the thread on it runs late and the others spin for it: a 3-epoch toy run took 155 s instead
# of 8.4 s with two busy processes on one of 2 cores. Sleeping at once (OMP_WAIT_POLICY=PASSIVE) cured that but
# cost up to 1.36x on idle cores (AMD EPYC). So a run takes one thread per core that is free when it starts,
# keeps OpenMP's own wait when that is every core and sleeps at once when some are busy; a callback
# (callbacks/threads.py) fits the count to the free cores again at each epoch. OMP_WAIT_POLICY is read when
# libgomp starts (torch's import): `choose_threads` runs before. A user's OMP_*/GOMP_* settings stay as set.
USER_THREADS = "OMP_NUM_THREADS"
USER_WAIT = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
BUSY_SHARE = 0.4  # a core counts as busy once other processes use 40% of it (two processes sharing one: 50% each)
MIN_WINDOW_S = 0.2  # the shortest look at the load before the run starts


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds spent so far on this process's cores by every process (`busy`) and by this one (`own`)."""

    at: float
    busy: float
    own: float


def cpu_sample() -> CpuSample | None:
    """The CPU seconds now, from /proc/stat's per-core lines (Linux); None where there are none."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    ticks = 0
    for line in lines:
        name, *fields = line.split() or [""]
        if not name.startswith("cpu") or not name[3:].isdigit() or (cores is not None and int(name[3:]) not in cores):
            continue
        values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
        ticks += sum(values) - values[3] - values[4]
    own = os.times()
    return CpuSample(at=time.monotonic(), busy=ticks / os.sysconf("SC_CLK_TCK"), own=own.user + own.system)


def busy_elsewhere(since: CpuSample | None, until: CpuSample | None) -> float:
    """The cores' worth of CPU that other processes used between two samples (0 without samples)."""
    if since is None or until is None or until.at <= since.at:
        return 0.0
    return max(0.0, (until.busy - since.busy) - (until.own - since.own)) / (until.at - since.at)


def fitting_threads(cores: int, elsewhere: float) -> int:
    """One thread per core of `cores` that other processes (`elsewhere` cores' worth of CPU) leave free, at least 1."""
    return max(1, cores - math.floor(elsewhere + 1 - BUSY_SHARE))


@dataclass(frozen=True)
class ThreadPolicy:
    """torch's thread count (None: the user's OMP_NUM_THREADS) and the OMP_WAIT_POLICY to set (None: leave it)."""

    threads: int | None
    wait: str | None


def thread_policy(cores: int, elsewhere: float, env: Mapping[str, str]) -> ThreadPolicy:
    """The threads a run starts with: one per free core, OpenMP's own wait when every core is free, PASSIVE when
    some are busy (a thread may then share a core: spinning for it would crawl); the user's settings win."""
    if USER_THREADS in env:
        return ThreadPolicy(threads=None, wait=None)
    threads = fitting_threads(cores, elsewhere)
    own_wait = any(name in env for name in USER_WAIT)
    return ThreadPolicy(threads=threads, wait=None if own_wait or threads >= cores else "PASSIVE")


STARTED = cpu_sample()  # the load is watched from the entry point's start (its imports, Hydra's composition)
chosen: ThreadPolicy | None = None


def choose_threads() -> ThreadPolicy | None:
    """Decide the run's threads from the load since the process started and set its wait policy; call it before
    torch is imported (None, and nothing set, once it is: libgomp read its settings then). `use_threads` applies
    the count."""
    global chosen
    if "torch" in sys.modules:
        return None
    if STARTED is not None and (wait := MIN_WINDOW_S - (time.monotonic() - STARTED.at)) > 0:
        time.sleep(wait)
    chosen = thread_policy(usable_cores(), busy_elsewhere(STARTED, cpu_sample()), os.environ)
    if chosen.wait is not None:
        os.environ["OMP_WAIT_POLICY"] = chosen.wait
    return chosen


def use_threads() -> None:
    """Give torch the thread count `choose_threads` chose (nothing if it chose none)."""
    if chosen is not None and chosen.threads is not None:
        import torch

        torch.set_num_threads(chosen.threads)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def free_cores() -> int:
    """The usable cores that other processes left free since this one started (at least 1): what the skip-gram's
    worker threads default to, so that they do not spin on a busy core either."""
    return fitting_threads(usable_cores(), busy_elsewhere(STARTED, cpu_sample()))
