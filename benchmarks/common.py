"""Shared helpers for the speed / memory benchmarks: interleaved timing, peak tensor memory,
the large-matmul FLOP/s ceiling, the machine description and the host's hour (host_gauge), tables and JSON.

Timing is interleaved: every round runs every candidate once, and each candidate's figure is
its median over rounds, so a burst of load from another process hits all of them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LOAD_AT_START = os.getloadavg()[0]  # 1-minute load average when the benchmark started


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a run timed as a user's shell starts it: without this shell's OMP_/GOMP_ settings (the
    entry points choose their threads), with Python's bytecode cache on (a container that sets
    PYTHONDONTWRITEBYTECODE, as some do, would have every run compile the project's modules again: 0.15 s), the
    hub offline; then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "PYTHONDONTWRITEBYTECODE"))}
    return {**env, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", **extra}


def timed_process(cmd: list[str], **run_args) -> tuple[float, float, subprocess.CompletedProcess]:
    """`subprocess.run(cmd, **run_args)`: its wall seconds, its CPU seconds (user + system, all its threads) and
    its result."""
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, **run_args)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def machine() -> dict:
    """What the figures were measured on: CPU model, cores, torch, threads, allocator settings."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        model = platform.processor() or "unknown"
    env = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_") or k == "LD_PRELOAD"}
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "allocator_env": env,
        "load_avg_at_start": LOAD_AT_START,
        "load_avg_at_end": os.getloadavg()[0],  # this benchmark's own threads included
    }


GAUGE = [sys.executable, "-c", "import lightning.pytorch"]


def host_gauge() -> float:
    """Wall seconds of `python -c "import lightning.pytorch"`: a gauge of the host's hour, recorded beside a whole
    run's absolute times. On a shared virtual machine it moves about as much as a run does from hour to hour (twice
    as slow at some hours, where a tight Python loop moves 1.2x), so it tells a slow hour from a slow change."""
    wall, _, _ = timed_process(GAUGE, cwd=ROOT, env=user_env(), check=True, capture_output=True)
    return wall


def hour_line(gauge: dict[str, float]) -> str:
    """The gauge taken before and after a benchmark's rounds, as one line."""
    return f"the hour: import lightning.pytorch {gauge['before']:.1f} s before the rounds, {gauge['after']:.1f} s after"


def interleaved_times(fns: dict[str, Callable[[], object]], rounds: int, warmup: int = 1) -> dict[str, dict]:
    """Seconds per call of each fn: `warmup` untimed calls each, then `rounds` rounds that call
    every fn once in turn; returns per name the median and min wall time, the median process CPU
    time (all threads; less sensitive to other processes than wall time), and the samples."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return {
        name: {
            "median_s": statistics.median(w),
            "min_s": min(w),
            "median_cpu_s": statistics.median(cpu[name]),
            "samples_s": [round(x, 6) for x in w],
        }
        for name, w in wall.items()
    }


def set_threads(threads: int | None) -> None:
    """torch's intra-op threads for this run (default: torch's own choice, one per core)."""
    if threads:
        torch.set_num_threads(threads)


def peak_memory_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes of tensor memory allocated by `fn` above what was live when it started.

    Measured with torch.profiler(profile_memory=True): every CPU allocator allocation and free
    inside `fn` is an event with a signed byte count; the peak is the running sum's maximum.
    It counts tensors (activations, saved tensors, gradients, temporaries), not the allocator's
    cached or fragmented pages nor MKL's private scratch buffers.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    running = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        running += e.nbytes()
        peak = max(peak, running)
    return peak


def matmul_step(dtype: torch.dtype = torch.float32, n: int = 2048) -> tuple[Callable[[], object], int]:
    """A large (n x n) @ (n x n) matmul and its FLOPs: the ceiling the model's GEMMs are held to.
    Time it among the candidates (interleaved_times) so that it sees the same load they do."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    return (lambda: a @ b), 2 * n**3


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A fixed-width text table; columns are (key, header, format spec)."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        cells.append([("-" if row.get(key) is None else format(row[key], fmt)) for key, _, fmt in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def side_by_side_args(doc: str, name: str, rounds: int) -> argparse.Namespace:
    """The command line of a benchmark that runs `python train.py` with and without something, side by side:
    `--rounds`, `--json` (default benchmarks/results/<name>.json) and extra overrides for both runs."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--json", type=Path, default=RESULTS / f"{name}.json")
    parser.add_argument("overrides", nargs="*", help="extra overrides for both runs, e.g. trainer.max_epochs=3")
    return parser.parse_args()
