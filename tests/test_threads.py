"""torch's threads: the count fixed by the machine (CPU affinity cut to a container's CPU quota) or the user's
OMP_NUM_THREADS, never by the load; the load only picks OpenMP's wait (its own on idle cores, PASSIVE beside busy
ones), decided before torch is imported and without waiting; a user's OMP_*/GOMP_* settings stay. The load is faked:
these tests hold whatever else the machine runs. tests/test_reproducible.py trains beside busy cores for real."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, entry_env

from transformer_attention import threads
from transformer_attention.threads import (
    CpuSample,
    ThreadPolicy,
    busy_elsewhere,
    busy_seconds,
    cgroup_dirs,
    cpu_quota,
    fitted_cores,
    quota_cores,
    thread_policy,
    user_threads,
    wait_policy,
)


@pytest.mark.parametrize(
    ("quota", "period", "cores"),
    [
        ("max", "100000", None),  # cgroup v2 without a quota
        ("200000", "100000", 2),  # v2: 2 cores' worth
        ("150000", "100000", 2),  # 1.5 cores: rounded up
        ("20000", "100000", 1),  # a fifth of a core: at least 1
        ("-1", "100000", None),  # cgroup v1 without a quota
        ("300000\n", "100000\n", 3),  # v1's files end with a newline
        ("", "", None),  # unreadable: no quota
    ],
)
def test_a_quota_in_cores(quota: str, period: str, cores: int | None):
    assert quota_cores(quota, period) == cores


def write(path: Path, text: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for line in text.splitlines():
        name, value = line.split("=")
        (path / name).write_text(value + "\n")


def test_the_quota_of_a_cgroup_v2_and_its_parents(tmp_path: Path):
    write(tmp_path / "jobs" / "run", "cpu.max=max 100000")
    assert cpu_quota("0::/jobs/run\n", tmp_path) is None
    write(tmp_path / "jobs", "cpu.max=250000 100000")  # a parent's quota holds its children too
    assert cpu_quota("0::/jobs/run\n", tmp_path) == 3
    write(tmp_path / "jobs" / "run", "cpu.max=100000 100000")  # the smallest wins
    assert cpu_quota("0::/jobs/run\n", tmp_path) == 1


def test_the_quota_of_a_cgroup_v1(tmp_path: Path):
    text = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n2:cpuset:/docker/abc\n"
    assert cpu_quota(text, tmp_path) is None  # no cgroup files at all
    write(tmp_path / "cpu,cpuacct" / "docker" / "abc", "cpu.cfs_quota_us=-1\ncpu.cfs_period_us=100000")
    assert cpu_quota(text, tmp_path) is None
    write(tmp_path / "cpu,cpuacct" / "docker" / "abc", "cpu.cfs_quota_us=200000\ncpu.cfs_period_us=100000")
    assert cpu_quota(text, tmp_path) == 2
    assert cpu_quota("3:cpuacct:/docker/abc\n", tmp_path) is None  # not the cpu controller


def test_a_container_sees_its_quota_at_the_mount(tmp_path: Path):
    # without a cgroup namespace, /proc/self/cgroup names the host's path, and the container mounts its own cgroup
    write(tmp_path / "cpu", "cpu.cfs_quota_us=100000\ncpu.cfs_period_us=100000")
    assert tmp_path / "cpu" in cgroup_dirs("5:cpu:/kubepods/pod1/abc\n", tmp_path)
    assert cpu_quota("5:cpu:/kubepods/pod1/abc\n", tmp_path) == 1


@pytest.mark.parametrize(
    ("affinity", "quota", "cores"),
    [(4, None, 4), (4, 2, 2), (2, 8, 2), (16, 1, 1), (1, None, 1)],
)
def test_the_usable_cores_are_the_affinity_cut_to_the_quota(affinity: int, quota: int | None, cores: int):
    assert fitted_cores(affinity, quota) == cores


def test_usable_cores_reads_both(monkeypatch):
    monkeypatch.setattr(threads, "affinity_cores", lambda: {0, 1, 2, 3})
    monkeypatch.setattr(threads, "cpu_quota", lambda text: 2)
    assert threads.usable_cores() == 2
    monkeypatch.setattr(threads, "cpu_quota", lambda text: None)
    assert threads.usable_cores() == 4


@pytest.mark.parametrize("elsewhere", [0.0, 0.5, 1.0, 2.0])
def test_the_load_never_changes_the_count(elsewhere: float):
    assert thread_policy(cores=2, elsewhere=elsewhere, env={}).threads == 2
    assert thread_policy(cores=2, elsewhere=elsewhere, env={"OMP_NUM_THREADS": "1"}).threads is None  # torch reads it


@pytest.mark.parametrize(
    ("threads", "cores", "elsewhere", "wait"),
    [
        (2, 2, 0.0, None),  # idle: OpenMP's own wait, the fastest there
        (2, 2, 0.3, None),  # a little background work: not a busy core
        (2, 2, 0.5, "PASSIVE"),  # a process sharing a core with one of ours gets half of it
        (2, 2, 1.0, "PASSIVE"),  # two busy processes on one core
        (1, 2, 2.0, None),  # one thread waits for no other
        (2, 16, 5.0, None),  # 11 idle cores for 2 threads
        (8, 8, 1.0, "PASSIVE"),
    ],
)
def test_the_wait_from_the_load(threads: int, cores: int, elsewhere: float, wait: str | None):
    assert wait_policy(threads, cores, elsewhere) == wait


@pytest.mark.parametrize(
    ("env", "elsewhere", "expected"),
    [
        ({}, 0.0, ThreadPolicy(threads=2, wait=None, why_wait="its own (the cores idle)")),
        ({}, 1.0, ThreadPolicy(threads=2, wait="PASSIVE", why_wait="PASSIVE (other processes busy on the cores)")),
        # the user's count: still the wait from the load, for that count
        ({"OMP_NUM_THREADS": "2"}, 1.0, ThreadPolicy(None, "PASSIVE", "PASSIVE (other processes busy on the cores)")),
        ({"OMP_NUM_THREADS": "1"}, 1.0, ThreadPolicy(None, None, "its own (one thread: none waits for another)")),
        ({"OMP_NUM_THREADS": "many"}, 1.0, ThreadPolicy(threads=None, wait=None, why_wait="its own")),  # torch's
        ({"OMP_WAIT_POLICY": "ACTIVE"}, 1.0, ThreadPolicy(2, None, "OMP_WAIT_POLICY=ACTIVE (yours)")),
        ({"OMP_WAIT_POLICY": ""}, 1.0, ThreadPolicy(2, None, "OMP_WAIT_POLICY= (yours)")),  # set, even empty
        ({"GOMP_SPINCOUNT": "1000"}, 1.0, ThreadPolicy(2, None, "GOMP_SPINCOUNT=1000 (yours)")),  # libgomp's own
    ],
)
def test_the_policy_from_the_load_and_the_users_settings(env: dict[str, str], elsewhere: float, expected):
    assert thread_policy(cores=2, elsewhere=elsewhere, env=env) == expected


def test_the_wait_beside_cores_to_spare():
    policy = thread_policy(cores=2, elsewhere=1.0, env={}, affinity=8)  # a quota of 2 of 8 cores, 1 of them busy
    assert policy == ThreadPolicy(threads=2, wait=None, why_wait="its own (enough cores idle)")


def test_the_users_count():
    assert [user_threads({"OMP_NUM_THREADS": v}) for v in ("4", "4,2", "", "many")] == [4, 4, None, None]
    assert user_threads({}) is None


def test_the_log_line_names_the_count_and_why():
    assert ThreadPolicy(2, "PASSIVE", "PASSIVE (other processes busy on the cores)").describe(2) == (
        "torch threads: 2 (the usable cores; OMP_NUM_THREADS sets another count), "
        "OpenMP wait: PASSIVE (other processes busy on the cores)"
    )
    users = ThreadPolicy(None, None, "its own (the cores idle)")
    assert users.describe(3).startswith("torch threads: 3 (OMP_NUM_THREADS)")


def test_busy_seconds_from_proc_stat():
    stat = (
        "cpu  900 0 300 5000 100 0 0 0 0 0\n"  # the sum line: not a core
        "cpu0 400 0 100 2000 50 0 0 0 0 0\n"  # 500 ticks busy (idle and iowait left out)
        "cpu1 500 10 200 3000 50 5 5 30 0 0\n"  # 750
        "intr 12345\n"
    )
    assert busy_seconds(stat, None, 100) == pytest.approx(12.5)
    assert busy_seconds(stat, {1}, 100) == pytest.approx(7.5)


def test_the_load_elsewhere_leaves_out_this_process():
    since = CpuSample(at=10.0, busy=100.0, own=5.0)
    # in 2 s the cores were busy 3.5 s, 1.5 s of it this process's: 1 core's worth elsewhere
    assert busy_elsewhere(since, CpuSample(at=12.0, busy=103.5, own=6.5)) == pytest.approx(1.0)
    assert busy_elsewhere(since, CpuSample(at=12.0, busy=101.0, own=6.5)) == 0.0  # never below 0
    assert busy_elsewhere(None, since) == busy_elsewhere(since, None) == 0.0  # no /proc/stat: no load known
    assert busy_elsewhere(since, CpuSample(at=10.05, busy=101.0, own=5.0)) == 0.0  # too short a look: no load known


def test_choosing_never_waits_to_sample_the_load(monkeypatch):
    """The load is what passed since the module's import: a config error is never delayed by a sampling sleep."""

    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"choose_threads slept {seconds} s")

    monkeypatch.setattr(threads.time, "sleep", no_sleep)
    monkeypatch.setattr(threads, "chosen", None)
    monkeypatch.setattr(threads, "STARTED", threads.cpu_sample())  # just now: the shortest look there is
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # as in an entry point, before torch's import
    for name in ("OMP_NUM_THREADS", *threads.USER_WAIT):
        monkeypatch.delenv(name, raising=False)
    policy = threads.choose_threads()
    assert policy.threads == threads.usable_cores()
    assert policy.wait is None  # no look at the load yet: OpenMP's own wait
    assert threads.choose_threads() is policy  # chosen once per process


# the entry point as it is, the load faked, its task replaced by one that reports what torch started with
REPORTING_TASK = """
import importlib, os, runpy, sys
threads = importlib.import_module("transformer_attention.threads")
run = importlib.import_module("transformer_attention.cli.run")  # the module (the package exports its function)
threads.busy_elsewhere = lambda since, until: {load}
choose = run.choose_threads

def choose_threads():
    print("torch loaded when the threads were chosen:", "torch" in sys.modules)
    return choose()

def report(cfg):
    import gc, torch
    print("started with", repr(os.environ.get("OMP_WAIT_POLICY")), torch.get_num_threads(), "gc", gc.isenabled())
    print("start-up's objects frozen:", gc.get_freeze_count() > 0)

run.choose_threads = choose_threads
run.TASKS[{task!r}] = lambda: report
sys.argv = [{script!r}, *sys.argv[1:]]
runpy.run_path({script!r}, run_name="__main__")
"""


def started_with(script: str, task: str, load: float, tmp_path, **env: str) -> tuple[str, str]:
    """What the entry point's task saw ("started with <OMP_WAIT_POLICY> <threads> gc True") and the run's log."""
    wrapper = tmp_path / f"report_{task}.py"
    wrapper.write_text(REPORTING_TASK.format(task=task, script=str(ROOT / script), load=load))
    environment = {k: v for k, v in entry_env().items() if not k.startswith(("OMP_", "GOMP_"))} | env
    args = [f"paths.log_dir={tmp_path / 'out'}"]
    proc = subprocess.run(
        [sys.executable, str(wrapper), *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch loaded when the threads were chosen: False" in proc.stdout  # OpenMP reads its policy at start
    assert "start-up's objects frozen: True" in proc.stdout  # out of the collector's walks
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("started with")]
    (log,) = (tmp_path / "out").glob(f"{task}/runs/*/{task}.log")
    return line, log.read_text()


@pytest.mark.parametrize("load", [0.0, 1.0])
def test_the_entry_point_chooses_before_torch_and_torch_runs_with_it(load: float, tmp_path):
    cores = threads.usable_cores()
    policy = thread_policy(cores=cores, elsewhere=load, env={})
    line, log = started_with("train.py", "train", load, tmp_path)
    assert line == f"started with {policy.wait!r} {cores} gc True"  # the usable cores, whatever the load
    assert f"threads: {cores} (the usable cores; OMP_NUM_THREADS sets another count), OpenMP wait: " in log
    if cores == 2:
        assert policy.wait == (None if load == 0 else "PASSIVE")


def test_the_users_threads_and_policy_stay(tmp_path):
    line, log = started_with("train.py", "train", 1.0, tmp_path, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="ACTIVE")
    assert line == "started with 'ACTIVE' 2 gc True"
    assert "threads: 2 (OMP_NUM_THREADS), OpenMP wait: OMP_WAIT_POLICY=ACTIVE (yours)" in log


def test_too_late_for_the_wait_once_torch_is_loaded():
    code = (
        "import os, torch; from transformer_attention.threads import choose_threads, usable_cores; "
        "p = choose_threads(); print(p.threads == usable_cores(), p.wait, os.environ.get('OMP_WAIT_POLICY'))"
    )
    environment = {k: v for k, v in entry_env().items() if not k.startswith(("OMP_", "GOMP_"))}
    proc = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "True None None"  # the count still set; libgomp read its wait when torch loaded
