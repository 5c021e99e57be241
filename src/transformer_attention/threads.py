"""torch's threads, chosen before torch is imported: a count the load never changes (OMP_NUM_THREADS, else the CPU
affinity cut to a container's CPU quota), since another count sums floats in another order: another model."""

import functools
import logging
import os
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path

log = logging.getLogger(__name__)


def cpu_quota(proc_cgroup: str, root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The smallest CPU quota, in cores rounded up, of the cgroup that /proc/self/cgroup's text names and of its
    parents: v2's `0::` line (`cpu.max` under `root`), v1's `cpu` controller (`cpu.cfs_quota_us` and
    `cpu.cfs_period_us` under `root/<controllers>` or `root/cpu`: a container may see its cgroup at the mount)."""
    quotas = []
    for line in proc_cgroup.splitlines():
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and not controllers:
            mounts = [root]
        elif "cpu" in controllers.split(","):
            mounts = [root / controllers, root / "cpu"]
        else:
            continue
        for mount in mounts:
            here = mount / path.strip().lstrip("/")
            for folder in [p for p in (here, *here.parents) if p.is_relative_to(mount)]:
                v2 = (folder / "cpu.max").is_file()
                names = ["cpu.max"] if v2 else ["cpu.cfs_quota_us", "cpu.cfs_period_us"]
                try:  # "max" or -1: no quota
                    quota, period = map(int, " ".join((folder / name).read_text() for name in names).split())
                except (OSError, ValueError):
                    continue
                quotas += [-(-quota // period)] if quota > 0 and period > 0 else []
    return min(quotas, default=None)


def usable_cores(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> int:
    """The cores this process may use: its CPU affinity, cut to its container's CPU quota; fixed for a run."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        return min(cores, cpu_quota(proc_cgroup.read_text(), root) or cores)
    except OSError:
        return cores


@functools.cache
def choose_threads() -> tuple[int | None, str]:
    """(torch's thread count, None: OMP_NUM_THREADS's; OpenMP's wait), once per process, before torch's import."""
    threads = None if "OMP_NUM_THREADS" in os.environ else usable_cores()
    return threads, choose_wait(threads) if "torch" not in sys.modules else "as it was when torch was imported"


def use_threads() -> None:
    """Give torch the chosen thread count and log it (the run's file keeps the line)."""
    import torch

    threads, wait = choose_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    whose = "OMP_NUM_THREADS" if threads is None else "the usable cores; OMP_NUM_THREADS sets another count"
    log.info("torch threads: %d (%s), OpenMP wait: %s", torch.get_num_threads(), whose, wait)


# ---- OpenMP's wait, from the load: from here to the end (choose_threads calls it once) ------------------------
# libgomp's threads spin before they sleep: fastest on idle cores, but beside a busy process the others spin for a
# thread sharing its core (3 epochs: 155 s, not 8.4 s, beside two busy processes on 1 of 2 cores). There a run sets
# OMP_WAIT_POLICY=PASSIVE (up to 1.36x slower idle), read at torch's import; the load: since this module's import.
def others_seconds() -> float:
    """CPU seconds other processes spent on this process's cores: /proc/stat's busy ticks less this process's."""
    stat = Path("/proc/stat")
    rows = [row.split() for row in stat.read_text().splitlines() if row.startswith("cpu")] if stat.exists() else []
    cores = {f"cpu{n}" for n in os.sched_getaffinity(0)} if rows else set()
    ticks = sum(sum(map(int, row[1:9])) - int(row[4]) - int(row[5]) for row in rows if row[0] in cores)  # not idle
    own = os.times()
    return ticks / os.sysconf("SC_CLK_TCK") - own.user - own.system


STARTED = (time.monotonic(), others_seconds())


def choose_wait(threads: int | None, env: MutableMapping[str, str] = os.environ) -> str:
    """How `threads` threads (None: OMP_NUM_THREADS's) wait, in words: the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT
    as set; PASSIVE (set in `env`) once fewer idle cores are left than they need (a core is busy from 40% used)."""
    if own := [f"{name}={env[name]}" for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if name in env]:
        return f"{', '.join(own)} (yours)"
    seconds = time.monotonic() - STARTED[0]
    busy = (others_seconds() - STARTED[1]) / seconds if seconds >= 0.1 else 0.0  # 10 ms ticks: a longer look
    first = env.get("OMP_NUM_THREADS", "").split(",")[0]
    count = threads or (int(first) if first.isdigit() else 0)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if count > 1 and busy >= cores - count + 0.4:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        return "PASSIVE (other processes busy on the cores)"
    if count <= 1:
        return "its own (one thread: none waits for another)" if count else "its own"
    return "its own (the cores idle)" if busy < 0.4 else "its own (enough cores idle)"
