"""What the end-of-fit analysis costs a default run: `python train.py` with and without it, side by side.

    python benchmarks/analysis.py [--rounds 4] [--json benchmarks/results/analysis.json] [-- extra overrides]

Each round runs the real entry point twice, as a user does (`python train.py callbacks.model_analysis.max_cost=null`,
the analysis always on, and `python train.py callbacks.model_analysis=null`, in alternating order, each in a
fresh temporary outputs folder; benchmarks/maps.py's `run`) and times the whole process. Reported: the ratio of
the median wall times, and the analysis' own time as the callback logs it ("model analysis: 1.2 s, 10% of the
fit's 12 s"), as a share of the fit and of the whole run.
"""

from __future__ import annotations

import re
import statistics
import sys

from common import machine, side_by_side_args, write_json
from maps import run

COST_LINE = re.compile(r"model analysis: ([\d.]+) s, \d+% of the fit's ([\d.]+) s \(estimated ([\d.]+) s\)")


def main() -> None:
    args = side_by_side_args(__doc__, "analysis", rounds=4)

    variants = {
        "with analysis": ["callbacks.model_analysis.max_cost=null"],
        "without": ["callbacks.model_analysis=null"],
    }
    samples: dict[str, list[dict]] = {name: [] for name in variants}
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))  # alternate: load hits both alike
        for name in order:
            result = run([*args.overrides, "callbacks.attention_maps=null", *variants[name]])
            cost = COST_LINE.search(result.pop("log"))
            result["analysis_s"], result["fit_s"], result["estimated_s"] = (
                (float(cost.group(1)), float(cost.group(2)), float(cost.group(3))) if cost else (0.0, None, None)
            )
            samples[name].append(result)
            print(f"round {r}: {name}: {result['wall_s']:.1f} s (analysis {result['analysis_s']:.2f} s)", flush=True)

    with_, without = samples["with analysis"], samples["without"]
    wall = {name: statistics.median(x["wall_s"] for x in runs) for name, runs in samples.items()}
    analysis_s = statistics.median(x["analysis_s"] for x in with_)
    fit_s = statistics.median(x["fit_s"] for x in with_)
    summary = {
        "wall_ratio": wall["with analysis"] / wall["without"],
        "analysis_s": analysis_s,
        "estimated_s": statistics.median(x["estimated_s"] for x in with_),
        "share_of_fit": analysis_s / fit_s,
        "share_of_run": analysis_s / wall["with analysis"],
        "wall_s": wall,
        "fit_s": fit_s,
        "samples_s": {name: [round(x["wall_s"], 2) for x in runs] for name, runs in samples.items()},
        "analysis_samples_s": [x["analysis_s"] for x in with_],
        "test_acc": [x["test_acc"] for x in with_ + without],
    }
    print(f"\nwall time, median: {wall['with analysis']:.1f} s with the analysis, {wall['without']:.1f} s without: "
          f"{summary['wall_ratio']:.3f}x")  # fmt: skip
    shares = f"{summary['share_of_fit']:.1%} of the fit's {fit_s:.1f} s, {summary['share_of_run']:.1%} of the run"
    print(f"the analysis itself: {analysis_s:.2f} s = {shares} (estimated beforehand: {summary['estimated_s']:.2f} s)")
    write_json(
        args.json,
        {
            "command": "python benchmarks/analysis.py " + " ".join(sys.argv[1:]),
            "overrides": args.overrides,
            "rounds": args.rounds,
            "machine": machine(),
            **summary,
        },
    )


if __name__ == "__main__":
    main()
