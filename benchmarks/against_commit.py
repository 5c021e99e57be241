"""The default toy run at this checkout against the same run at an earlier commit, side by side.

    python benchmarks/against_commit.py REV [--rounds 4] [-- extra overrides]

Checks REV (say HEAD~4, or a tag) out in a temporary git worktree and times `python train.py` from launch to exit in
both trees, alternating which goes first round by round, each run in a fresh temporary outputs folder (PROJECT_ROOT)
with its own tree's source first on PYTHONPATH (the installed dependencies are shared) and Python's bytecode cache
on, as in a user's shell (the first, untimed run of each tree writes it). On a noisy machine the ratio of each
round's pair is steadier than either median, and the CPU seconds (all threads) steadier than the wall time. Prints
the CPU, each tree's median and the median ratios (this checkout over REV: below 1 is faster) and the hour (`python
-c "import lightning.pytorch"` before and after the rounds: common.host_gauge), and writes
benchmarks/results/against_commit.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, ROOT, host_gauge, hour_line, machine, timed_process, user_env, write_json


def timed(tree: Path, overrides: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, all threads) of `python train.py <overrides>` in `tree`, launch to
    exit."""
    with tempfile.TemporaryDirectory() as out:
        env = user_env(PROJECT_ROOT=out, PYTHONPATH=str(tree / "src"))
        wall, cpu, _ = timed_process(
            [sys.executable, "train.py", *overrides], cwd=tree, env=env, check=True, capture_output=True
        )
        return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the earlier commit: a hash, HEAD~4, a tag")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("overrides", nargs="*", help="after --: the same overrides for both runs")
    args = parser.parse_intermixed_args()
    git = {"cwd": ROOT, "check": True, "capture_output": True, "text": True}
    rev = subprocess.run(["git", "rev-parse", "--short", args.rev], **git)
    cpu = machine()
    print(f"CPU: {cpu['cpu']}, {len(os.sched_getaffinity(0))} usable cores; this checkout against {rev.stdout.strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        earlier = Path(tmp) / "earlier"
        subprocess.run(["git", "worktree", "add", "--detach", str(earlier), args.rev], **git)
        try:
            trees = {"this checkout": ROOT, args.rev: earlier}
            for tree in trees.values():
                timed(tree, args.overrides)  # warm-up: the disk cache and the bytecode cache
            gauge = {"before": host_gauge()}
            wall: dict[str, list[float]] = {name: [] for name in trees}
            cpu_s: dict[str, list[float]] = {name: [] for name in trees}
            for n in range(args.rounds):
                for name in list(trees)[:: 1 if n % 2 else -1]:
                    seconds, cpu_seconds = timed(trees[name], args.overrides)
                    wall[name].append(seconds)
                    cpu_s[name].append(cpu_seconds)
                    print(f"  round {n + 1}  {name:<14} {seconds:6.1f} s wall {cpu_seconds:6.1f} s CPU", flush=True)
            gauge["after"] = host_gauge()
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(earlier)], cwd=ROOT, capture_output=True)
    ratios = [a / b for a, b in zip(wall["this checkout"], wall[args.rev], strict=True)]
    cpu_ratios = [a / b for a, b in zip(cpu_s["this checkout"], cpu_s[args.rev], strict=True)]
    median = {name: statistics.median(values) for name, values in wall.items()}
    print(f"this checkout {median['this checkout']:.1f} s, {args.rev} {median[args.rev]:.1f} s (medians)")
    wall_ratio, cpu_ratio = statistics.median(ratios), statistics.median(cpu_ratios)
    print(f"this checkout / {args.rev}: {wall_ratio:.3f}x wall, {cpu_ratio:.3f}x CPU, medians of {args.rounds} rounds")
    print(hour_line(gauge))
    write_json(
        RESULTS / "against_commit.json",
        {
            "command": " ".join(["python train.py", *args.overrides]),
            "against": {"rev": args.rev, "commit": rev.stdout.strip()},
            "rounds": args.rounds,
            "median_s": median,
            "ratio": wall_ratio,
            "cpu_ratio": cpu_ratio,
            "ratios": ratios,
            "cpu_ratios": cpu_ratios,
            "samples_s": wall,
            "cpu_samples_s": cpu_s,
            "machine": cpu,
            "import_lightning_s": gauge,
            "date": time.strftime("%Y-%m-%d"),
        },
    )


if __name__ == "__main__":
    main()
