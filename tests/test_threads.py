"""torch's threads chosen from the load: one per free core, OpenMP's own wait when every core is free, PASSIVE when
some are busy, decided before torch is imported and fitted again at each epoch; a user's OMP_*/GOMP_* settings stay.
The load is faked: these tests hold whatever else the machine runs. benchmarks/busy_cores.py measures the times."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, entry_env

from transformer_attention import threads
from transformer_attention.callbacks import threads as thread_fit
from transformer_attention.threads import CpuSample, ThreadPolicy, busy_elsewhere, fitting_threads, thread_policy


@pytest.mark.parametrize(
    ("cores", "elsewhere", "threads"),
    [
        (2, 0.0, 2),  # idle
        (2, 0.3, 2),  # a little background work: not a busy core
        (2, 0.5, 1),  # a process sharing a core with one of ours gets half of it
        (2, 0.67, 1),  # two busy processes on one core beside one of ours: two thirds of it
        (2, 1.0, 1),
        (2, 2.0, 1),  # every core busy: still one thread
        (8, 2.9, 5),
    ],
)
def test_one_thread_per_free_core(cores: int, elsewhere: float, threads: int):
    assert fitting_threads(cores, elsewhere) == threads


@pytest.mark.parametrize(
    ("env", "elsewhere", "expected"),
    [
        ({}, 0.0, ThreadPolicy(threads=2, wait=None)),  # idle: OpenMP's own wait, the fastest there
        ({}, 1.0, ThreadPolicy(threads=1, wait="PASSIVE")),  # a busy core: sleep at once
        ({"OMP_NUM_THREADS": "1"}, 1.0, ThreadPolicy(threads=None, wait=None)),  # the user chose threads
        ({"OMP_WAIT_POLICY": "ACTIVE"}, 1.0, ThreadPolicy(threads=1, wait=None)),  # the user's policy stays
        ({"OMP_WAIT_POLICY": ""}, 1.0, ThreadPolicy(threads=1, wait=None)),  # set, even empty: the user's
        ({"GOMP_SPINCOUNT": "1000"}, 1.0, ThreadPolicy(threads=1, wait=None)),  # libgomp's own setting
    ],
)
def test_the_policy_from_the_load_and_the_users_settings(env: dict[str, str], elsewhere: float, expected):
    assert thread_policy(cores=2, elsewhere=elsewhere, env=env) == expected


def test_the_load_elsewhere_leaves_out_this_process():
    since = CpuSample(at=10.0, busy=100.0, own=5.0)
    # in 2 s the cores were busy 3.5 s, 1.5 s of it this process's: 1 core's worth elsewhere
    assert busy_elsewhere(since, CpuSample(at=12.0, busy=103.5, own=6.5)) == pytest.approx(1.0)
    assert busy_elsewhere(since, CpuSample(at=12.0, busy=101.0, own=6.5)) == 0.0  # never below 0
    assert busy_elsewhere(None, since) == busy_elsewhere(since, None) == 0.0  # no /proc/stat: no load known


@pytest.mark.skipif(threads.cpu_sample() is None, reason="no /proc/stat on this system")
def test_a_sample_counts_this_process_work():
    before = threads.cpu_sample()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    after = threads.cpu_sample()
    assert after.own - before.own >= 0.25
    assert after.busy - before.busy >= after.own - before.own - 0.05  # the cores' count holds ours (tick rounding)


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


def started_with(script: str, task: str, load: float, tmp_path, **env: str) -> str:
    wrapper = tmp_path / f"report_{task}.py"
    wrapper.write_text(REPORTING_TASK.format(task=task, script=str(ROOT / script), load=load))
    environment = {k: v for k, v in entry_env().items() if not k.startswith(("OMP_", "GOMP_"))} | env
    args = [f"paths.log_dir={tmp_path / 'out'}", "hydra.job_logging.root.level=WARNING"]
    proc = subprocess.run(
        [sys.executable, str(wrapper), *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch loaded when the threads were chosen: False" in proc.stdout  # OpenMP reads its policy at start
    assert "start-up's objects frozen: True" in proc.stdout  # out of the collector's walks
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("started with")]
    return line


@pytest.mark.parametrize("load", [0.0, 1.0])
def test_the_entry_point_chooses_before_torch_and_torch_runs_with_it(load: float, tmp_path):
    cores = threads.usable_cores()
    policy = thread_policy(cores=cores, elsewhere=load, env={})
    assert started_with("train.py", "train", load, tmp_path) == f"started with {policy.wait!r} {policy.threads} gc True"
    if load and cores == 2:
        assert policy == ThreadPolicy(threads=1, wait="PASSIVE")


def test_the_users_threads_and_policy_stay(tmp_path):
    line = started_with("train.py", "train", 1.0, tmp_path, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="ACTIVE")
    assert line == "started with 'ACTIVE' 2 gc True"


def test_too_late_once_torch_is_loaded():
    code = "import os, torch; from transformer_attention.threads import choose_threads; print(choose_threads())"
    environment = {k: v for k, v in entry_env().items() if not k.startswith(("OMP_", "GOMP_"))}
    proc = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "None"  # libgomp read its settings when torch loaded: nothing is set


def test_each_epoch_fits_the_threads_to_the_free_cores(monkeypatch):
    loads = iter([1.0, 0.0])
    monkeypatch.setattr(thread_fit, "busy_elsewhere", lambda since, until: next(loads))
    monkeypatch.setattr(thread_fit, "usable_cores", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    callback, seen = thread_fit.ThreadFit(), []
    before = torch.get_num_threads()
    try:
        for _ in range(3):  # the first epoch has no epoch before it: the count the run started with stays
            callback.on_train_epoch_start(None, None)
            seen.append(torch.get_num_threads())
    finally:
        torch.set_num_threads(before)
    assert seen == [before, 1, 2]


def test_the_users_thread_count_is_kept_at_each_epoch(monkeypatch):
    monkeypatch.setattr(thread_fit, "busy_elsewhere", lambda since, until: 1.0)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    callback, before = thread_fit.ThreadFit(), torch.get_num_threads()
    for _ in range(3):
        callback.on_train_epoch_start(None, None)
    assert torch.get_num_threads() == before
    assert os.environ["OMP_NUM_THREADS"] == "2"
