"""How long `python train.py` takes to start: from launching the real entry point to its first training
step on the toy set, and how long `python train.py --help` and a refused config take: values the rules refuse
before torch is imported (train.py's and pretrain.py's optimiser, trainer and skip-gram values), and one that only
trying the Trainer's signature finds (after torch and Lightning are imported, before any data).

    python benchmarks/startup.py [--repeats 5] [--extra data.toy_size=4000]

Each measurement is a fresh process (`python train.py ...`, the default model and data unless --extra
says otherwise, outputs in a temporary folder). The first-step time comes from a callback added with
`+callbacks.first_step=...` that writes the wall-clock time at the first `on_train_batch_start` to the
file named by STARTUP_MARK and stops the run there; the figure is that time minus the launch time.
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
    """At the first training batch, write the time to $STARTUP_MARK and stop the run."""

    def on_train_batch_start(self, *args: object) -> None:
        Path(os.environ[MARK_ENV]).write_text(repr(time.time()))
        raise SystemExit(0)  # the measurement is taken: no training, no test


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


def wall(args: list[str], expect_rc: int, script: str = "train.py") -> float:
    """Seconds `python <script> args` takes to exit (outputs in a temporary folder), checking its exit status and,
    for a refusal, that it said so in one `config error:` line."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(ROOT / script), *args, f"paths.log_dir={tmp}"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if proc.returncode != expect_rc or (expect_rc == 1 and not proc.stderr.startswith("config error: ")):
        raise SystemExit(f"{script} {' '.join(args)} exited {proc.returncode}, not {expect_rc}: {proc.stderr[-500:]}")
    return seconds


REFUSED = [  # (script, overrides): refused by a rule, before torch is imported
    ("train.py", ["model.num_heads=5"]),
    ("train.py", ["model.optimizer.weight_decay=-1"]),
    ("train.py", ["+model.optimizer.betas=[2,0.9]"]),
    ("train.py", ["trainer.accumulate_grad_batches=0"]),
    ("train.py", ["trainer.gradient_clip_val=-1"]),
    ("train.py", ["model.init_from=pretrain", "pretrain.method=skipgram", "pretrain.skipgram.dim=17"]),
    ("pretrain.py", ["pretrain.optimizer.weight_decay=-1"]),
    ("pretrain.py", ["+pretrain.optimizer.betas=[2,0.9]"]),
    ("pretrain.py", ["pretrain.trainer.accumulate_grad_batches=0"]),
    ("pretrain.py", ["pretrain.trainer.gradient_clip_val=-1"]),
    ("pretrain.py", ["pretrain.method=skipgram", "pretrain.skipgram.dim=17"]),
]
TRIED = ("train.py", ["+trainer.max_epoch=3"])  # refused by trying the Trainer's signature: torch imported first


def cpu_model() -> str:
    """The CPU's model name, as lscpu gives it."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")), "?")


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
    }
    for script, overrides in [*REFUSED, TRIED]:
        name = f"python {script} {' '.join(overrides)}"
        cases[name] = lambda script=script, overrides=overrides: wall(overrides, expect_rc=1, script=script)
    rows = {name: [] for name in cases}
    for _ in range(args.repeats):  # interleaved, so a burst of load hits every case alike
        for name, measure in cases.items():
            rows[name].append(measure())
    width = max(map(len, rows))
    print(f"{'':<{width}} {'median s':>9} {'min s':>7} {'max s':>7}   ({args.repeats} runs each)")
    for name, values in rows.items():
        s = summary(values)
        print(f"{name:<{width}} {s['median_s']:>9.2f} {s['min_s']:>7.2f} {s['max_s']:>7.2f}")
    load = os.getloadavg()[0]
    print(f"load average (1 min) at the end: {load:.2f}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    results = {"benchmark": "startup", "repeats": args.repeats, "extra": args.extra, "load_at_end": load}
    results["cpu"] = cpu_model()
    results["rows"] = {name: {**summary(v), "runs_s": v} for name, v in rows.items()}
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
