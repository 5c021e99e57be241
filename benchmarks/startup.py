"""How long `python train.py` takes to start: from launching the real entry point to its first training
step on the toy set, and how long `python train.py --help` and a config error take.

    python benchmarks/startup.py [--repeats 5] [--extra data.toy_size=4000]

Each measurement is a fresh process (`python train.py ...`, the default model and data unless --extra
says otherwise, outputs in a temporary folder). The first-step time comes from a callback added with
`+callbacks.first_step=...` that writes the wall-clock time at the first `on_train_batch_start` to the
file named by STARTUP_MARK and ends the process there; the figure is that time minus the launch time.
Prints the median and range over the repeats (after one unmeasured warm-up run, so the disk cache is
warm as in everyday use) and writes benchmarks/results/startup.json.
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
from pathlib import Path

from lightning.pytorch.callbacks import Callback

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
MARK_ENV = "STARTUP_MARK"


class FirstStep(Callback):
    """At the first training batch, write the time to $STARTUP_MARK and end the process."""

    def on_train_batch_start(self, *args: object) -> None:
        Path(os.environ[MARK_ENV]).write_text(repr(time.time()))
        os._exit(0)  # the measurement is taken: skip training, testing and teardown


def env() -> dict[str, str]:
    python_path = os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", PYTHONPATH=python_path)


def first_step(extra: list[str]) -> float:
    """Seconds from launching `python train.py` to its first training step."""
    with tempfile.TemporaryDirectory() as tmp:
        mark = Path(tmp) / "mark"
        cmd = [
            sys.executable,
            str(ROOT / "train.py"),
            f"paths.log_dir={tmp}",
            "+callbacks.first_step._target_=startup.FirstStep",
            *extra,
        ]
        start = time.time()
        proc = subprocess.run(cmd, cwd=ROOT, env={**env(), MARK_ENV: str(mark)}, capture_output=True, text=True)
        if not mark.is_file():
            raise SystemExit(f"{' '.join(cmd)} reached no training step ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return float(mark.read_text()) - start


def wall(args: list[str], expect_rc: int) -> float:
    """Seconds `python train.py args` takes to exit, checking its exit status."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT, env=env(), capture_output=True)
    seconds = time.perf_counter() - start
    if proc.returncode != expect_rc:
        raise SystemExit(f"train.py {' '.join(args)} exited {proc.returncode}, not {expect_rc}")
    return seconds


def summary(values: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(values), "min_s": min(values), "max_s": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--extra", nargs="*", default=[], help="more overrides for the first-step runs")
    parser.add_argument("--json", type=Path, default=RESULTS / "startup.json")
    args = parser.parse_args()

    first_step(args.extra)  # warm-up: disk cache, tokenized-data cache, .pyc files
    cases = {
        "python train.py -> first training step": lambda: first_step(args.extra),
        "python train.py --help": lambda: wall(["--help"], expect_rc=0),
        "python train.py model.num_heads=5 (config error)": lambda: wall(["model.num_heads=5"], expect_rc=1),
    }
    rows = {name: [] for name in cases}
    for _ in range(args.repeats):  # interleaved, so a burst of load hits every case alike
        for name, measure in cases.items():
            rows[name].append(measure())
    print(f"{'':<50} {'median s':>9} {'min s':>7} {'max s':>7}   ({args.repeats} runs each)")
    for name, values in rows.items():
        s = summary(values)
        print(f"{name:<50} {s['median_s']:>9.2f} {s['min_s']:>7.2f} {s['max_s']:>7.2f}")
    load = os.getloadavg()[0]
    print(f"load average (1 min) at the end: {load:.2f}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    results = {"benchmark": "startup", "repeats": args.repeats, "extra": args.extra, "load_at_end": load}
    results["rows"] = {name: {**summary(v), "runs_s": v} for name, v in rows.items()}
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
