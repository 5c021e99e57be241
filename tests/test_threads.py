"""torch's threads: the count fixed by the machine (CPU affinity cut to a container's CPU quota, read from the cgroup
files a test writes) or the user's OMP_NUM_THREADS, never by the load; the load only picks OpenMP's wait (its own on
idle cores, PASSIVE beside busy ones), decided before torch is imported and without waiting; a user's OMP_*/GOMP_*
settings stay. The load is faked: these tests hold whatever else the machine runs. tests/test_reproducible.py
trains beside busy cores for real."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, entry_env

from transformer_attention import threads
from transformer_attention.threads import choose_wait, cpu_quota, usable_cores


def write(path: Path, text: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for line in text.splitlines():
        name, value = line.split("=")
        (path / name).write_text(value + "\n")


@pytest.mark.parametrize(
    ("cpu_max", "cores"),
    [
        ("max 100000", None),  # no quota
        ("200000 100000", 2),  # 2 cores' worth
        ("150000 100000", 2),  # 1.5 cores: rounded up
        ("20000 100000", 1),  # a fifth of a core: at least 1
    ],
)
def test_a_cgroup_v2_quota_in_cores(tmp_path: Path, cpu_max: str, cores: int | None):
    write(tmp_path / "jobs", f"cpu.max={cpu_max}")
    assert cpu_quota("0::/jobs\n", tmp_path) == cores


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
    write(tmp_path / "unreadable", "cpu.cfs_quota_us=200000")  # no period: no quota known
    assert cpu_quota("3:cpu:/unreadable\n", tmp_path) is None


def test_a_container_sees_its_quota_at_the_mount(tmp_path: Path):
    # without a cgroup namespace, /proc/self/cgroup names the host's path, and the container mounts its own cgroup
    write(tmp_path / "cpu", "cpu.cfs_quota_us=100000\ncpu.cfs_period_us=100000")
    assert cpu_quota("5:cpu:/kubepods/pod1/abc\n", tmp_path) == 1


@pytest.mark.parametrize(("affinity", "cpu_max", "cores"), [(4, "max", 4), (4, "200000", 2), (2, "800000", 2)])
def test_the_usable_cores_are_the_affinity_cut_to_the_quota(tmp_path, monkeypatch, affinity, cpu_max, cores):
    (tmp_path / "cgroup").write_text("0::/job\n")  # what /proc/self/cgroup says
    write(tmp_path / "fs" / "job", f"cpu.max={cpu_max} 100000")
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    assert usable_cores(tmp_path / "cgroup", tmp_path / "fs") == cores
    assert usable_cores(tmp_path / "nothing", tmp_path / "fs") == affinity  # no /proc/self/cgroup: no quota


def fake_load(monkeypatch, busy_cores: float) -> None:
    """Other processes have used `busy_cores` cores' worth of this process's cores since the module's import."""
    monkeypatch.setattr(threads, "STARTED", (time.monotonic() - 10.0, 0.0))
    monkeypatch.setattr(threads, "others_seconds", lambda: busy_cores * 10.0)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)


@pytest.mark.parametrize(
    ("threads_", "busy", "env", "wait", "why"),
    [
        (2, 0.0, {}, None, "its own (the cores idle)"),  # idle: OpenMP's own wait, the fastest there
        (2, 0.3, {}, None, "its own (the cores idle)"),  # a little background work: not a busy core
        (2, 0.5, {}, "PASSIVE", "PASSIVE (other processes busy on the cores)"),  # sharing a core: half of it
        (2, 1.0, {}, "PASSIVE", "PASSIVE (other processes busy on the cores)"),
        (1, 2.0, {}, None, "its own (one thread: none waits for another)"),  # one thread waits for no other
        (None, 1.0, {"OMP_NUM_THREADS": "2"}, "PASSIVE", "PASSIVE (other processes busy on the cores)"),  # its count
        (None, 1.0, {"OMP_NUM_THREADS": "many"}, None, "its own"),  # torch's to read
        (2, 1.0, {"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE", "OMP_WAIT_POLICY=ACTIVE (yours)"),
        (2, 1.0, {"OMP_WAIT_POLICY": ""}, "", "OMP_WAIT_POLICY= (yours)"),  # set, even empty
        (2, 1.0, {"GOMP_SPINCOUNT": "1000"}, None, "GOMP_SPINCOUNT=1000 (yours)"),  # libgomp's own
    ],
)
def test_the_wait_from_the_load_and_the_users_settings(monkeypatch, threads_, busy, env, wait, why):
    fake_load(monkeypatch, busy)
    assert choose_wait(threads_, env) == why
    assert env.get("OMP_WAIT_POLICY") == wait


def test_the_wait_beside_cores_to_spare(monkeypatch):
    fake_load(monkeypatch, 1.0)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert choose_wait(2, {}) == "its own (enough cores idle)"  # a quota of 2 of 8 cores, 1 of them busy


def test_choosing_never_waits_to_sample_the_load(monkeypatch):
    """The load is what passed since the module's import: a config error is never delayed by a sampling sleep."""

    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"the choice slept {seconds} s")

    monkeypatch.setattr(threads.time, "sleep", no_sleep)
    monkeypatch.setattr(threads, "STARTED", (time.monotonic(), threads.others_seconds()))  # the shortest look
    env: dict[str, str] = {}
    assert choose_wait(2, env) == "its own (the cores idle)" and not env  # no look at the load yet: OpenMP's own


# the entry point as it is, the load faked, its task replaced by one that reports what torch started with
REPORTING_TASK = """
import importlib, os, runpy, sys, time, types
threads = importlib.import_module("transformer_attention.threads")
run = importlib.import_module("transformer_attention.cli.run")  # the module (the package exports its function)
threads.STARTED = (time.monotonic() - 1e6, 0.0)
threads.others_seconds = lambda: {load} * 1e6
choose = run.choose_threads

def choose_threads():
    print("torch loaded when the threads were chosen:", "torch" in sys.modules)
    return choose()

def report(cfg):
    import gc, torch
    print("started with", repr(os.environ.get("OMP_WAIT_POLICY")), torch.get_num_threads(), "gc", gc.isenabled())
    print("start-up's objects frozen:", gc.get_freeze_count() > 0)

run.choose_threads = choose_threads
sys.modules["transformer_attention.tasks." + {task!r}] = types.SimpleNamespace(main=report)  # the task, replaced
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
def test_the_entry_point_chooses_before_torch_and_torch_runs_with_it(load: float, tmp_path, monkeypatch):
    cores = usable_cores()
    monkeypatch.setattr(threads, "STARTED", (time.monotonic() - 1e6, 0.0))
    monkeypatch.setattr(threads, "others_seconds", lambda: load * 1e6)
    expected: dict[str, str] = {}
    choose_wait(cores, expected)  # the wait for this load on this machine's cores
    line, log = started_with("train.py", "train", load, tmp_path)
    assert line == f"started with {expected.get('OMP_WAIT_POLICY')!r} {cores} gc True"  # the count, whatever the load
    assert f"threads: {cores} (the usable cores; OMP_NUM_THREADS sets another count), OpenMP wait: " in log
    if cores == 2 == len(threads.os.sched_getaffinity(0)):
        assert expected.get("OMP_WAIT_POLICY") == (None if load == 0 else "PASSIVE")


def test_the_users_threads_and_policy_stay(tmp_path):
    line, log = started_with("train.py", "train", 1.0, tmp_path, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="ACTIVE")
    assert line == "started with 'ACTIVE' 2 gc True"
    assert "threads: 2 (OMP_NUM_THREADS), OpenMP wait: OMP_WAIT_POLICY=ACTIVE (yours)" in log


def test_too_late_for_the_wait_once_torch_is_loaded():
    code = (
        "import os, torch; from transformer_attention.threads import choose_threads, usable_cores; "
        "threads, wait = choose_threads(); print(threads == usable_cores(), wait, os.environ.get('OMP_WAIT_POLICY'))"
    )
    environment = {k: v for k, v in entry_env().items() if not k.startswith(("OMP_", "GOMP_"))}
    proc = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "True as it was when torch was imported None"  # the count still set
