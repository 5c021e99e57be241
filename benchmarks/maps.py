"""What the attention maps cost a default run: `python train.py` with and without the maps, side by side.

    python benchmarks/maps.py [--rounds 3] [--json benchmarks/results/maps.json] [-- extra overrides]

Each round runs the real entry point twice, as a user does (`python train.py` and `python train.py
callbacks.attention_maps=null`, in alternating order, each in a fresh temporary outputs folder), and
times the whole process (wall clock, and the CPU time of all its threads). The ratio of the median wall
times is the figure the README shows (the issue's target: at most 1.10); the CPU-time ratio, less
sensitive to other load on the machine, and the maps' own time, which the callback logs at the end of
fit, are reported too.
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
from pathlib import Path

from common import ROOT, machine, side_by_side_args, timed_process, write_json

COST_LINE = re.compile(
    r"(\d+) images? at (\d+) steps?, ([\d.]+) s on the training thread(?:, ([\d.]+) s on their own)?"
)


def run(overrides: list[str]) -> dict:
    """One `python train.py ...` in a fresh outputs folder: its wall time and the maps' logged cost."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "train.py", f"paths.log_dir={tmp}", "trainer.enable_progress_bar=false", *overrides]
        wall, cpu, done = timed_process(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        log = next(Path(tmp).glob("train/runs/*/train.log")).read_text()
    cost = COST_LINE.search(log)
    acc = re.search(r"test/acc\s+([\d.]+)", done.stdout)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "maps_s": float(cost.group(3)) if cost else 0.0,  # what the training thread spent on the maps
        "writing_s": float(cost.group(4) or 0) if cost else 0.0,  # encoding and writing, on the callback's thread
        "images": int(cost.group(1)) if cost else 0,
        "logs": int(cost.group(2)) if cost else 0,
        "test_acc": float(acc.group(1)) if acc else None,
        "log": log,  # the run's train.log, for other benchmarks' own lines (benchmarks/analysis.py)
    }


def main() -> None:
    args = side_by_side_args(__doc__, "maps", rounds=3)

    variants = {"with maps": [], "without maps": ["callbacks.attention_maps=null"]}
    samples: dict[str, list[dict]] = {name: [] for name in variants}
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))  # alternate: load hits both alike
        for name in order:
            samples[name].append(run([*args.overrides, *variants[name]]))
            print(f"round {r}: {name}: {samples[name][-1]['wall_s']:.1f} s", flush=True)

    rows = []
    for name, runs in samples.items():
        rows.append(
            {
                "variant": name,
                "wall_s": statistics.median(x["wall_s"] for x in runs),
                "cpu_s": statistics.median(x["cpu_s"] for x in runs),
                "maps_s": statistics.median(x["maps_s"] for x in runs),
                "writing_s": statistics.median(x["writing_s"] for x in runs),
                "images": runs[0]["images"],
                "logs": runs[0]["logs"],
                "test_acc": runs[0]["test_acc"],
                "samples_s": [round(x["wall_s"], 2) for x in runs],
            }
        )
    ratio = rows[0]["wall_s"] / rows[1]["wall_s"]
    cpu_ratio = rows[0]["cpu_s"] / rows[1]["cpu_s"]
    print(f"\n{'variant':<14}{'wall s':>8}{'cpu s':>8}{'maps s':>8}{'write s':>8}{'images':>8}{'logs':>6}  samples")
    for row in rows:
        print(
            f"{row['variant']:<14}{row['wall_s']:>8.1f}{row['cpu_s']:>8.1f}{row['maps_s']:>8.2f}{row['writing_s']:>8.2f}"
            f"{row['images']:>8}{row['logs']:>6}  {row['samples_s']}"
        )
    print(f"cost of the maps: {ratio:.3f}x the wall time of the run without them (target: at most 1.10)")
    print(f"                  {cpu_ratio:.3f}x its CPU time (all threads; less sensitive to other load)")
    write_json(
        args.json,
        {
            "command": "python benchmarks/maps.py " + " ".join(sys.argv[1:]),
            "overrides": args.overrides,
            "rounds": args.rounds,
            "machine": machine(),
            "rows": rows,
            "ratio": ratio,
            "cpu_ratio": cpu_ratio,
        },
    )


if __name__ == "__main__":
    main()
