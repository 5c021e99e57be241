"""torch's threads: how many, fixed by the machine or the user, and how idle ones wait, from the load.
Torch-free: the entry shell decides before torch is imported.

A different thread count sums floats in a different order, so the count is fixed for a run by what does not
change with the load: the user's OMP_NUM_THREADS, else the cores this process may use (its CPU affinity, cut to a
container's CPU quota). The same seed then gives the same model on idle cores and beside other work.

What the load may choose is only how a waiting thread waits, which changes no result. torch's OpenMP threads (GNU
libgomp) spin a while at a barrier before they sleep: on idle cores the fastest way to wait, but where another
process shares one of their cores the thread on it runs late and the others spin for it (a 3-epoch toy run took
155 s instead of 8.4 s beside two busy processes on one of 2 cores). So a run keeps OpenMP's own wait when the
cores are idle and sets OMP_WAIT_POLICY=PASSIVE (sleep at once) when other processes are busy on them (PASSIVE on
idle cores cost up to 1.36x: sleeping threads are slow to wake). libgomp reads the policy when it starts (torch's
import), so `choose_threads` runs before; the load is what other processes used since this module was imported
(the entry point's imports and Hydra's composition): nothing waits to sample it. A user's OMP_WAIT_POLICY or
GOMP_SPINCOUNT stays as set.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

USER_THREADS = "OMP_NUM_THREADS"
USER_WAIT = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
BUSY_SHARE = 0.4  # a core counts as busy once other processes use 40% of it (two processes sharing one: 50% each)
MIN_WINDOW_S = 0.1  # a shorter look at the load (10 ms ticks) says too little: OpenMP's own wait
CGROUP_ROOT = Path("/sys/fs/cgroup")


# ---- the usable cores: affinity and CPU quota ------------------------------------------------------------
def quota_cores(quota: str, period: str) -> int | None:
    """The cores a CPU quota of `quota` microseconds per `period` gives, rounded up, at least 1; None without a
    quota (cgroup v2 writes "max", v1 "-1")."""
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return max(1, -(-q // p)) if q > 0 and p > 0 else None


def cgroup_dirs(proc_cgroup: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """The folders that may hold this process's CPU quota, from its /proc/self/cgroup text: its cgroup (v2's `0::`
    line under `root`, v1's `cpu` controller under `root/<controllers>` or `root/cpu`) and each parent up to the
    mount. A container that shows its own cgroup as the mount's root finds its quota at the mount."""
    dirs: list[Path] = []
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
            dirs += [here, *(p for p in here.parents if p.is_relative_to(mount))]
    return list(dict.fromkeys(dirs))


def read_quota(folder: Path) -> int | None:
    """The CPU quota in cores that `folder` sets (v2 `cpu.max` "quota period", v1 `cpu.cfs_quota_us` and
    `cpu.cfs_period_us`), None where it sets none or cannot be read."""
    try:
        if (folder / "cpu.max").is_file():
            return quota_cores(*((folder / "cpu.max").read_text().split() + ["", ""])[:2])
        if (folder / "cpu.cfs_quota_us").is_file():
            return quota_cores((folder / "cpu.cfs_quota_us").read_text(), (folder / "cpu.cfs_period_us").read_text())
    except OSError:
        return None
    return None


def cpu_quota(proc_cgroup: str, root: Path = CGROUP_ROOT) -> int | None:
    """The smallest CPU quota, in cores, of this process's cgroup and its parents (`cgroup_dirs`); None: no quota."""
    quotas = [q for q in map(read_quota, cgroup_dirs(proc_cgroup, root)) if q is not None]
    return min(quotas, default=None)


def fitted_cores(affinity: int, quota: int | None) -> int:
    """The cores a run may use: its CPU affinity's count, cut to the quota (at least 1)."""
    return max(1, min(affinity, quota if quota is not None else affinity))


def affinity_cores() -> set[int] | None:
    """The cores this process may run on (its CPU affinity), None where the system does not say."""
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


def usable_cores() -> int:
    """The cores this process may use: its CPU affinity, cut to its container's CPU quota; fixed for a run."""
    cores = affinity_cores()
    try:
        quota = cpu_quota(Path("/proc/self/cgroup").read_text())
    except OSError:
        quota = None
    return fitted_cores(len(cores) if cores is not None else os.cpu_count() or 1, quota)


# ---- the load: CPU seconds of other processes on this process's cores -------------------------------------
@dataclass(frozen=True)
class CpuSample:
    """CPU seconds spent so far on this process's cores by every process (`busy`) and by this one (`own`)."""

    at: float
    busy: float
    own: float


def busy_seconds(proc_stat: str, cores: set[int] | None, ticks_per_s: float) -> float:
    """The CPU seconds that /proc/stat's text `proc_stat` counts as busy on `cores` (None: every core): user, nice,
    system, irq, softirq and steal, not idle nor iowait."""
    ticks = 0
    for line in proc_stat.splitlines():
        name, *fields = line.split() or [""]
        if not name.startswith("cpu") or not name[3:].isdigit() or (cores is not None and int(name[3:]) not in cores):
            continue
        values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
        ticks += sum(values) - values[3] - values[4]
    return ticks / ticks_per_s


def cpu_sample() -> CpuSample | None:
    """The CPU seconds now (Linux's /proc/stat); None where there is none."""
    try:
        stat = Path("/proc/stat").read_text()
    except OSError:
        return None
    own = os.times()
    busy = busy_seconds(stat, affinity_cores(), os.sysconf("SC_CLK_TCK"))
    return CpuSample(at=time.monotonic(), busy=busy, own=own.user + own.system)


def busy_elsewhere(since: CpuSample | None, until: CpuSample | None) -> float:
    """The cores' worth of CPU that other processes used between two samples (0 without samples or over a look
    shorter than MIN_WINDOW_S)."""
    if since is None or until is None or until.at - since.at < MIN_WINDOW_S:
        return 0.0
    return max(0.0, (until.busy - since.busy) - (until.own - since.own)) / (until.at - since.at)


# ---- the choice --------------------------------------------------------------------------------------------
def user_threads(env: Mapping[str, str]) -> int | None:
    """The thread count the user's OMP_NUM_THREADS gives (its first number), None if it is unset or not a number."""
    try:
        return int(env[USER_THREADS].split(",")[0])
    except (KeyError, ValueError):
        return None


def wait_policy(threads: int, cores: int, elsewhere: float) -> str | None:
    """How `threads` OpenMP threads on `cores` cores should wait while other processes use `elsewhere` cores' worth
    of them: "PASSIVE" (sleep at once) when fewer cores are left than the threads need, else None (OpenMP's own)."""
    return "PASSIVE" if threads > 1 and elsewhere >= cores - threads + BUSY_SHARE else None


@dataclass(frozen=True)
class ThreadPolicy:
    """torch's thread count (None: the user's OMP_NUM_THREADS, as torch reads it) and the OMP_WAIT_POLICY to set
    (None: leave it), with why, for the run's log."""

    threads: int | None
    wait: str | None
    why_wait: str

    def describe(self, threads: int) -> str:
        """The run's log line, `threads` being the count torch runs with."""
        whose = "OMP_NUM_THREADS" if self.threads is None else "the usable cores; OMP_NUM_THREADS sets another count"
        return f"torch threads: {threads} ({whose}), OpenMP wait: {self.why_wait}"


def thread_policy(cores: int, elsewhere: float, env: Mapping[str, str], affinity: int | None = None) -> ThreadPolicy:
    """The run's threads: the user's OMP_NUM_THREADS, else the `cores` it may use (the load never changes the
    count); the wait from the load on the `affinity` cores it is measured on (default `cores`) unless the user
    set one."""
    threads = None if USER_THREADS in env else cores
    if own := [f"{name}={env[name]}" for name in USER_WAIT if name in env]:
        return ThreadPolicy(threads=threads, wait=None, why_wait=f"{', '.join(own)} (yours)")
    count = user_threads(env) if threads is None else threads
    wait = None if count is None else wait_policy(count, affinity or cores, elsewhere)
    if wait is not None:
        why = "PASSIVE (other processes busy on the cores)"
    elif count is None or count == 1:
        why = "its own" + (" (one thread: none waits for another)" if count else "")
    else:
        why = "its own (the cores idle)" if elsewhere < BUSY_SHARE else "its own (enough cores idle)"
    return ThreadPolicy(threads=threads, wait=wait, why_wait=why)


STARTED = cpu_sample()  # the load is watched from here: the entry point's imports, Hydra's composition
chosen: ThreadPolicy | None = None


def choose_threads() -> ThreadPolicy:
    """Decide the run's threads and set OpenMP's wait policy, at once (no waiting to sample the load). Call it before
    torch is imported: libgomp reads its settings when it starts, so after that the wait stays as it is. The first
    choice holds for the process (a sweep's later jobs in it reuse it); `use_threads` applies the count."""
    global chosen
    if chosen is not None:
        return chosen
    if "torch" in sys.modules:  # too late for the wait
        threads = None if USER_THREADS in os.environ else usable_cores()
        chosen = ThreadPolicy(threads=threads, wait=None, why_wait="as it was when torch was imported")
        return chosen
    affinity = affinity_cores()
    elsewhere = busy_elsewhere(STARTED, cpu_sample())
    chosen = thread_policy(usable_cores(), elsewhere, os.environ, affinity=len(affinity) if affinity else None)
    if chosen.wait is not None:
        os.environ["OMP_WAIT_POLICY"] = chosen.wait
    return chosen


def use_threads() -> str:
    """Give torch the thread count `choose_threads` chose and log it; returns the log line."""
    import torch

    policy = choose_threads()
    if policy.threads is not None:
        torch.set_num_threads(policy.threads)
    line = policy.describe(torch.get_num_threads())
    log.info(line)
    return line
