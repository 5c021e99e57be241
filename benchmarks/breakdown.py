"""Where the default toy run's time goes, read from real runs: start-up, training, the maps, the end of fit, the
test and the exit.

    python benchmarks/breakdown.py [--rounds 3] [-- extra overrides]

Each round is a fresh `python train.py` exactly as typed (PROJECT_ROOT puts its outputs/ in a temporary folder;
Python's bytecode cache on, as in a user's shell), nothing added to it. The parts come from the launch and exit
times and the time stamps of the run's own log (`<run>/train.log`, millisecond stamps):

- start-up: launch to the model's summary line (imports, the config, the data, the tokenizer, the model);
- first epoch and later epochs: to each epoch's line (its training, validation and checkpoints, and the maps of the
  steps that log them: the first epoch also sets up the maps' figures and runs the sanity check);
- the maps: their own seconds as their log line gives them (inside the epochs and the end of fit);
- end of fit: the last epoch's line to the analysis' line (the last maps, the interactive pages, the analysis);
- test: to the test's line; exit: from the last line to the process' end (the final table, closing the loggers).

Prints the median of each part and writes benchmarks/results/breakdown.json with every sample, beside the time of
`python -c "import lightning.pytorch"` before and after the rounds (common.host_gauge: how fast the host was at that
hour).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from common import RESULTS, ROOT, host_gauge, hour_line, machine, user_env, write_json

STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[[^]]*\]\[\w+\] - (.*)$")
MAPS = re.compile(r"images? at \d+ steps?, ([\d.]+) s on the training thread")


def log_lines(run_dir: Path) -> list[tuple[float, str]]:
    """(epoch seconds, message) of each line of the run's train.log (continuation lines skipped)."""
    lines = []
    for line in (run_dir / "train.log").read_text().splitlines():
        if match := STAMP.match(line):
            stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time, as logged
            lines.append((stamp, match[2]))
    return lines


def one_run(overrides: list[str]) -> dict[str, float]:
    """The parts of one `python train.py` run, in seconds."""
    with tempfile.TemporaryDirectory() as out:
        env = user_env(PROJECT_ROOT=out)
        launch = time.time()  # wall-clock time, as the log's stamps
        subprocess.run([sys.executable, "train.py", *overrides], cwd=ROOT, env=env, check=True, capture_output=True)
        end = time.time()
        (run_dir,) = Path(out, "outputs", "train", "runs").iterdir()
        lines = log_lines(run_dir)

    def at(prefix: str) -> list[float]:
        return [stamp for stamp, message in lines if message.startswith(prefix)]

    model, epochs = at("model: ")[0], at("epoch ")
    end_of_fit = (at("model analysis") or at("interactive attention views") or epochs[-1:])[-1]
    test = (at("test of ") or [end_of_fit])[-1]
    maps = [float(m[1]) for _, message in lines if (m := MAPS.search(message))]
    return {
        "start-up": model - launch,
        "first epoch": epochs[0] - model,
        "later epochs": epochs[-1] - epochs[0],
        "end of fit": end_of_fit - epochs[-1],
        "test": test - end_of_fit,
        "exit": end - lines[-1][0],
        "total": end - launch,
        "maps (within the above)": maps[0] if maps else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="after --: overrides for every run")
    args = parser.parse_intermixed_args()
    cpu = machine()
    print(f"CPU: {cpu['cpu']}, {len(os.sched_getaffinity(0))} usable cores")
    one_run(args.overrides)  # warm-up: the disk cache and the bytecode cache
    gauge = {"before": host_gauge()}
    samples: dict[str, list[float]] = {}
    for n in range(args.rounds):
        for part, seconds in one_run(args.overrides).items():
            samples.setdefault(part, []).append(seconds)
        print(f"  round {n + 1}: {samples['total'][-1]:.1f} s", flush=True)
    gauge["after"] = host_gauge()
    median = {part: statistics.median(values) for part, values in samples.items()}
    for part, seconds in median.items():
        print(f"{part:<24} {seconds:6.2f} s")
    print(hour_line(gauge))
    write_json(
        RESULTS / "breakdown.json",
        {
            "command": " ".join(["python train.py", *args.overrides]),
            "rounds": args.rounds,
            "median_s": median,
            "samples_s": samples,
            "machine": cpu,
            "import_lightning_s": gauge,
            "date": time.strftime("%Y-%m-%d"),
        },
    )


if __name__ == "__main__":
    main()
