"""The default toy run on idle cores and beside busy ones, with the entry points' thread policy and without it.

    python benchmarks/busy_cores.py [--rounds 3] [--idle-rounds 8] [--epochs 3]

Each measurement is a fresh `python train.py trainer.max_epochs=3 callbacks.attention_maps=null` (the default
model and toy data, outputs in a temporary folder), timed from launch to exit. Four conditions, interleaved
round by round so a change of load hits them alike (the idle pair in alternating order, over more rounds: a
run varies by a few percent from one launch to the next):

- idle, policy: the entry points' default (they set OMP_WAIT_POLICY=PASSIVE when the user set neither
  OMP_NUM_THREADS nor OMP_WAIT_POLICY: torch's OpenMP threads sleep while they wait);
- idle, no policy: OMP_WAIT_POLICY set but empty, which the entry points leave alone and OpenMP ignores, so
  its own default applies (threads spin a while before they sleep): what every run did before;
- busy, policy / busy, no policy: the same with two other processes spinning on one core (`taskset -c 1`),
  the case of a second job, a notebook or TensorBoard beside a training run. The slow case (threads spinning at
  a barrier for the one on the crowded core) is timed once a round, with a time limit.

Prints the median of each and the ratios (busy / idle, policy / no policy at idle, also as the median of
each round's ratio), and writes benchmarks/results/busy_cores.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext

from common import RESULTS, ROOT, machine, write_json


def timed_run(epochs: int, env_extra: dict[str, str], timeout: float) -> float:
    """Seconds of one default toy run, from launch to exit (a run past `timeout` counts as `timeout`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    env.update(env_extra, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, str(ROOT / "train.py"), f"trainer.max_epochs={epochs}", "callbacks.attention_maps=null"]
        cmd += ["trainer.enable_progress_bar=false", f"paths.log_dir={out}"]
        start = time.perf_counter()
        try:
            subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return timeout
        return time.perf_counter() - start


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


CONDITIONS = {  # name: (busy, environment)
    "idle, policy": (False, {}),
    "idle, no policy": (False, {"OMP_WAIT_POLICY": ""}),
    "busy, policy": (True, {}),
    "busy, no policy": (True, {"OMP_WAIT_POLICY": ""}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the busy conditions")
    parser.add_argument("--idle-rounds", type=int, default=8, help="rounds of the idle ones (a 3%% gap needs more)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=400.0)
    args = parser.parse_args()
    timed_run(args.epochs, {}, args.timeout)  # warm-up: disk cache, tokenizer cache of the toy set
    samples: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    for n in range(max(args.rounds, args.idle_rounds)):
        names = [name for name, (busy, _) in CONDITIONS.items() if n < (args.rounds if busy else args.idle_rounds)]
        idle = [name for name in names if not CONDITIONS[name][0]]
        if n % 2:  # the idle pair in turn first and second, so a drift of the machine hits both alike
            names = [*idle[::-1], *(name for name in names if name not in idle)]
        for name in names:
            busy, env = CONDITIONS[name]
            with busy_core() if busy else nullcontext():
                samples[name].append(timed_run(args.epochs, env, args.timeout))
            print(f"{name:<16} {samples[name][-1]:7.1f} s", flush=True)
    result = summarise(samples, args)
    print(f"\nmedian seconds of a default toy run ({args.epochs} epochs, no attention maps):")
    for name, value in result["median_s"].items():
        print(f"  {name:<16} {value:7.1f} s")
    for name, value in result["ratios"].items():
        print(f"  {name:<40} {value:5.2f}x")
    write_json(RESULTS / "busy_cores.json", result)


def summarise(samples: dict[str, list[float]], args: argparse.Namespace) -> dict:
    """The medians, the ratios and the machine. At idle the two conditions also compare round by round (each
    round's pair ran back to back): the median of those ratios, which a slow stretch of the machine moves less."""
    median = {name: statistics.median(values) for name, values in samples.items()}
    paired = [a / b for a, b in zip(samples["idle, policy"], samples["idle, no policy"], strict=False)]
    return {
        "command": f"python train.py trainer.max_epochs={args.epochs} callbacks.attention_maps=null",
        "busy": "2 processes spinning on core 1 (taskset -c 1)",
        "rounds": {"busy": args.rounds, "idle": args.idle_rounds},
        "median_s": median,
        "samples_s": samples,
        "ratios": {
            "busy / idle, policy": median["busy, policy"] / median["idle, policy"],
            "busy / idle, no policy": median["busy, no policy"] / median["idle, no policy"],
            "policy / no policy, idle (medians)": median["idle, policy"] / median["idle, no policy"],
            "policy / no policy, idle (paired rounds)": statistics.median(paired),
        },
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    main()
