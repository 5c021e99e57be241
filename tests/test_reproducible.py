"""One seed, one model, whatever else the machine runs: `python train.py trainer.max_epochs=3` gives a bit-identical
best checkpoint on idle cores and beside two processes spinning on one core, because torch's thread count is fixed
by the usable cores, never by the load (threads.py); the load only picks how waiting threads wait.

The checkpoints are compared by their numbers (`numbers_digest`: the weights and the optimizer's and scheduler's
state), not by the files' bytes, which differ between any two runs: the callbacks' state in a `.ckpt` holds the run's
own paths. The test would catch a count that followed the load: one thread instead of two (what the busy run chose
before) trains a different model, which its last assertion checks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import entry_env, run_dirs, run_entry

from transformer_attention.threads import usable_cores

# train.py's defaults with 3 epochs of 8 batches (the default model and batch: threads split their sums; 8 steps
# differ with the count as 50 do) and a 1-batch test; the maps and the analysis only read the trained model
THREE_EPOCHS = ["trainer.max_epochs=3", "trainer.limit_train_batches=8", "trainer.limit_test_batches=1"]
THREE_EPOCHS += ["callbacks.attention_maps=null", "callbacks.model_analysis=null"]


@contextmanager
def busy_core(core: int, processes: int = 2) -> Iterator[None]:
    """`processes` Python loops spinning on `core` for the duration (a second job, a notebook beside a run)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        for loop in loops:
            os.sched_setaffinity(loop.pid, {core})
        time.sleep(1.0)  # running before the run starts, so its choice sees them
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def best_checkpoint(tmp_path: Path, name: str, **env: str) -> tuple[str, Path, str]:
    """Train once in `tmp_path/name` with the environment's OMP_/GOMP_ settings left out (then `env`): the best
    checkpoint's file name and digest, and the run's log."""
    from transformer_attention.training.checkpoint import numbers_digest

    log_dir = tmp_path / name
    environment = {k: v for k, v in entry_env().items() if not k.startswith(("OMP_", "GOMP_"))} | env
    run_entry("train.py", *THREE_EPOCHS, f"paths.log_dir={log_dir}", env=environment)
    (run,) = run_dirs(log_dir)
    (best,) = (run / "checkpoints").glob("epoch_*.ckpt")
    return best.name, numbers_digest(best), (run / "train.log").read_text()


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or usable_cores() < 2,
    reason="needs 2 usable cores: one of them busy, and threads that could follow the load",
)
def test_the_same_model_on_idle_and_busy_cores(tmp_path: Path):
    cores = usable_cores()
    line = f"threads: {cores} (the usable cores; OMP_NUM_THREADS sets another count)"
    idle = best_checkpoint(tmp_path, "idle")
    with busy_core(min(os.sched_getaffinity(0))):
        busy = best_checkpoint(tmp_path, "busy")
    assert line in idle[2] and line in busy[2]  # the same count: the usable cores
    if cores == len(os.sched_getaffinity(0)):
        assert "OpenMP wait: PASSIVE (other processes busy on the cores)" in busy[2]  # the load was seen
    assert busy[:2] == idle[:2]  # the same best epoch, the same numbers bit for bit

    one_thread = best_checkpoint(tmp_path, "one_thread", OMP_NUM_THREADS="1")
    assert "threads: 1 (OMP_NUM_THREADS)" in one_thread[2]
    assert one_thread[1] != idle[1]  # a count that followed the load would have changed the model


def test_the_digest_reads_the_numbers_not_the_paths(tmp_path: Path):
    import torch

    from transformer_attention.training.checkpoint import numbers_digest

    def saved(name: str, weight: torch.Tensor, run: str) -> Path:
        ckpt = {
            "state_dict": {"net.w": weight, "net.mask": torch.tensor([True, False])},
            "optimizer_states": [{"state": {0: {"step": torch.tensor(3.0)}}, "param_groups": [{"lr": 0.001}]}],
            "hyper_parameters": {"vocab_size": 10},
            "callbacks": {"ModelCheckpoint": {"dirpath": f"{run}/checkpoints"}},
        }
        torch.save(ckpt, tmp_path / name)
        return tmp_path / name

    weight = torch.linspace(0, 1, 6).reshape(2, 3)
    first, second = saved("a.ckpt", weight, "/runs/a"), saved("b.ckpt", weight.clone(), "/runs/b")
    assert first.read_bytes() != second.read_bytes()
    assert numbers_digest(first) == numbers_digest(second)
    changed = weight.clone()
    changed.view(torch.int32)[0, 1] += 1  # one bit of one weight
    assert numbers_digest(saved("c.ckpt", changed, "/runs/a")) != numbers_digest(first)
    assert numbers_digest(saved("d.ckpt", weight.reshape(3, 2), "/runs/a")) != numbers_digest(first)  # the shape too
