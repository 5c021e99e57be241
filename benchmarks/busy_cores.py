"""The default toy run with the project's thread choice: against OpenMP's spinning at idle, and beside busy cores,
where it must train the same model.

    python benchmarks/busy_cores.py [--rounds 3] [--spin-when-busy]

Each measurement is a fresh `python train.py ...` exactly as typed (PROJECT_ROOT puts its outputs/ in a temporary
folder; Python's bytecode cache on, as in a user's shell), timed from launch to exit, its CPU seconds (user + system)
beside. Per round, in turn (the idle pair in
alternating order, so a drift of the machine hits both alike):

- idle, default: `python train.py`, 10 epochs, attention maps and analysis on, the project's thread choice (one
  torch thread per usable core; OpenMP's own wait on idle cores, PASSIVE beside busy ones: threads.choose_threads);
- idle, ACTIVE: the same with OMP_WAIT_POLICY=ACTIVE, where waiting threads spin without end (the fastest a
  thread can pick up work on idle cores);
- 3 epochs, idle / busy: `python train.py trainer.max_epochs=3 callbacks.attention_maps=null`, on idle cores and
  with two other processes spinning on one of them (`taskset -c 1`), the case of a second job, a notebook or
  TensorBoard beside a training run;
- with --spin-when-busy, also the busy one with OMP_WAIT_POLICY=ACTIVE: what spinning costs there (minutes).

Prints the CPU and three figures: the default run's median wall time, its ratio to ACTIVE (the median of each
round's pair) and the busy 3-epoch run's median over the idle one's; the hour: `python -c "import
lightning.pytorch"` timed before and after the rounds (common.host_gauge); and the best checkpoint's digest of each
3-epoch run (training.checkpoint.numbers_digest: its weights and optimizer state, not the file's bytes, which hold
the run's paths), idle and busy, and whether they all match: one seed must give one model, whatever the load.
Writes benchmarks/results/busy_cores.json, where each CPU model keeps its own entry.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

from common import RESULTS, ROOT, host_gauge, hour_line, machine, timed_process, user_env, write_json

from transformer_attention.training.checkpoint import numbers_digest

DEFAULT = ["python", "train.py"]
THREE_EPOCHS = [*DEFAULT, "trainer.max_epochs=3", "callbacks.attention_maps=null"]
CONDITIONS = {  # name: (command, busy, environment)
    "idle, default": (DEFAULT, False, {}),
    "idle, ACTIVE": (DEFAULT, False, {"OMP_WAIT_POLICY": "ACTIVE"}),
    "3 epochs, idle": (THREE_EPOCHS, False, {}),
    "3 epochs, busy": (THREE_EPOCHS, True, {}),
}
SPINNING = {"3 epochs, busy, ACTIVE": (THREE_EPOCHS, True, {"OMP_WAIT_POLICY": "ACTIVE"})}
RESULT = RESULTS / "busy_cores.json"


def timed_run(command: list[str], env_extra: dict[str, str], timeout: float) -> tuple[float, float, str | None]:
    """Wall and CPU seconds of one run, from launch to exit (a run past `timeout` counts as `timeout`), and its best
    checkpoint's digest (None: none written)."""
    with tempfile.TemporaryDirectory() as out:  # its outputs/ there: the command line stays what a user types
        env = user_env(**env_extra, PROJECT_ROOT=out)
        cmd = [sys.executable, *command[1:]]
        try:
            wall, cpu, _ = timed_process(cmd, cwd=ROOT, env=env, check=True, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return timeout, float("nan"), None
        return wall, cpu, best_digest(Path(out))


def best_digest(project: Path) -> str | None:
    """The digest of the best checkpoint (`epoch_*.ckpt`) of the one run under `project`'s outputs/."""
    best = sorted(project.glob("outputs/train/runs/*/checkpoints/epoch_*.ckpt"))
    return numbers_digest(best[0]) if len(best) == 1 else None


@contextmanager
def busy_core(processes: int = 2, core: int = 1):
    """`processes` Python loops pinned to `core` for the duration."""
    loops = [
        subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", "while True: pass"])
        for _ in range(processes)
    ]
    try:
        time.sleep(1.0)
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spin-when-busy", action="store_true", help="also time the busy run with ACTIVE (slow)")
    parser.add_argument("--timeout", type=float, default=400.0)
    args = parser.parse_args()
    conditions = CONDITIONS | (SPINNING if args.spin_when_busy else {})
    cpu = machine()
    print(f"CPU: {cpu['cpu']}, {len(os.sched_getaffinity(0))} usable cores", flush=True)
    timed_run(DEFAULT, {}, args.timeout)  # warm-up: the disk cache (each run's own caches start empty)
    gauge = {"before": host_gauge()}
    wall: dict[str, list[float]] = {name: [] for name in conditions}
    cpu_s: dict[str, list[float]] = {name: [] for name in conditions}
    digests: dict[str, list[str | None]] = {name: [] for name in conditions}
    for n in range(args.rounds):
        names = list(conditions)
        if n % 2:
            names[0], names[1] = names[1], names[0]
        for name in names:
            command, busy, env = conditions[name]
            with busy_core() if busy else nullcontext():
                seconds, cpu_seconds, digest = timed_run(command, env, args.timeout)
            wall[name].append(seconds)
            cpu_s[name].append(cpu_seconds)
            digests[name].append(digest)
            print(f"  round {n + 1}  {name:<22} {seconds:6.1f} s wall {cpu_seconds:6.1f} s CPU", flush=True)
    gauge["after"] = host_gauge()
    result = summarise(wall, cpu_s, cpu, args.rounds) | {"import_lightning_s": gauge}
    result["best_checkpoint"] = model = same_model(digests)
    figures = result["figures"]
    print(f"default toy run (python train.py), idle:    {figures['default_s']:5.1f} s  median of {args.rounds}")
    print(f"its time / OMP_WAIT_POLICY=ACTIVE, idle:     {figures['default / active']:5.2f}x  median of paired rounds")
    print(f"3-epoch run beside 2 busy processes / idle: {figures['busy / idle']:5.2f}x  medians")
    print(hour_line(gauge))
    for name, values in model["digests"].items():
        print(f"best checkpoint, {name}: {', '.join(d or 'none' for d in values)}")
    print(f"the same model idle and busy, every round: {'yes' if model['same'] else 'NO'}")
    everything = json.loads(RESULT.read_text()) if RESULT.is_file() else {}
    runs = everything.get("runs", {}) if isinstance(everything.get("runs"), dict) else {}
    write_json(RESULT, {"runs": runs | {cpu["cpu"]: result}})


def same_model(digests: dict[str, list[str | None]]) -> dict:
    """The 3-epoch runs' best-checkpoint digests per condition, and whether they are all one (none missing)."""
    three = {name: values for name, values in digests.items() if name.startswith("3 epochs")}
    found = {d for values in three.values() for d in values}
    return {"digests": three, "same": len(found) == 1 and None not in found}


def described(name: str) -> str:
    """A condition's command line, its environment first."""
    command, busy, env = (CONDITIONS | SPINNING)[name]
    return " ".join([*(f"{k}={v}" for k, v in env.items()), *command]) + (" beside 2 busy processes" if busy else "")


def summarise(wall: dict[str, list[float]], cpu_s: dict[str, list[float]], cpu: dict, rounds: int) -> dict:
    """The three figures, the medians and every sample, and the machine."""
    median = {name: statistics.median(values) for name, values in wall.items()}
    paired = [a / b for a, b in zip(wall["idle, default"], wall["idle, ACTIVE"], strict=True)]
    return {
        "commands": {name: described(name) for name in wall},
        "busy": "2 processes spinning on core 1 (taskset -c 1)",
        "rounds": rounds,
        "figures": {
            "default_s": median["idle, default"],
            "default / active": statistics.median(paired),
            "busy / idle": median["3 epochs, busy"] / median["3 epochs, idle"],
        },
        "median_s": median,
        "median_cpu_s": {name: statistics.median(values) for name, values in cpu_s.items()},
        "samples_s": wall,
        "machine": cpu,
        "date": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    main()
