"""Accuracy and wall time of full training runs across speed settings: attention-weight dropout
and precision, on the toy set and Rotten Tomatoes.

    python benchmarks/accuracy.py [--datasets toy rotten_tomatoes] [--seeds 1 2] [--extra model.d_model=128]

Each run is `python train.py data=... seed=... model.attention_dropout=... trainer.precision=...`
in a fresh process (the default model and trainer otherwise), run one after another; the table
gives test accuracy (the best checkpoint), best validation accuracy (both read from the run's
metrics.csv) and the run's wall time,
then the mean over seeds per setting. Rotten Tomatoes is read from ../shared/data (skipped when
absent). Prints tables and writes benchmarks/results/accuracy.json.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, ROOT, machine, table, write_json

from transformer_attention.training.metrics import final_metrics

DATA = ROOT.parent / "shared" / "data"
DATASETS = {"toy": ["data=toy"], "rotten_tomatoes": ["data=rotten_tomatoes", f"data.path={DATA / 'rotten_tomatoes'}"]}


def run(overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            str(ROOT / "train.py"),
            *overrides,
            f"paths.log_dir={tmp}",
            "trainer.enable_progress_bar=false",
            "callbacks.attention_maps=null",
        ]
        env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
        (run_dir,) = Path(tmp).glob("train/runs/*")
        metrics = final_metrics(run_dir)  # the run's metrics.csv
    return {"test_acc": metrics["test/acc"], "val_acc_best": metrics["val/acc_best"], "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--attention-dropouts", type=float, nargs="+", default=[0.0, 0.1])
    parser.add_argument("--precisions", nargs="+", default=["32-true", "bf16-mixed"])
    parser.add_argument("--extra", nargs="*", default=[], help="more overrides for every run")
    parser.add_argument("--json", default=str(RESULTS / "accuracy.json"))
    args = parser.parse_args()

    rows = []
    for dataset in args.datasets:
        if dataset != "toy" and not (DATA / dataset).is_dir():
            print(f"skipping {dataset}: {DATA / dataset} is absent")
            continue
        for seed, attn_p, precision in itertools.product(args.seeds, args.attention_dropouts, args.precisions):
            overrides = [
                *DATASETS[dataset],
                f"seed={seed}",
                f"model.attention_dropout={attn_p}",
                f"trainer.precision={precision}",
                *args.extra,
            ]
            rows.append(
                {
                    "dataset": dataset,
                    "seed": seed,
                    "attention_dropout": attn_p,
                    "precision": precision,
                    **run(overrides),
                }
            )
            print(table(rows[-1:], COLUMNS), flush=True)
    summary = []
    for key, group in itertools.groupby(
        sorted(rows, key=lambda r: (r["dataset"], r["attention_dropout"], r["precision"])),
        key=lambda r: (r["dataset"], r["attention_dropout"], r["precision"]),
    ):
        group = list(group)
        summary.append(
            {
                "dataset": key[0],
                "attention_dropout": key[1],
                "precision": key[2],
                "seed": len(group),
                **{m: statistics.mean(r[m] for r in group) for m in ("test_acc", "val_acc_best", "wall_s")},
            }
        )
    print(f"\nruns (overrides: {' '.join(args.extra) or 'none'})")
    print(table(rows, COLUMNS))
    print("\nmean over seeds (seed column: how many)")
    print(table(summary, COLUMNS))
    write_json(
        Path(args.json),
        {
            "benchmark": "accuracy of full runs",
            "machine": machine(),
            "config": vars(args),
            "rows": rows,
            "summary": summary,
        },
    )


COLUMNS = [
    ("dataset", "dataset", "s"),
    ("attention_dropout", "attn dropout", "g"),
    ("precision", "precision", "s"),
    ("seed", "seed", "d"),
    ("test_acc", "test acc", ".4f"),
    ("val_acc_best", "val acc best", ".4f"),
    ("wall_s", "wall s", ".0f"),
]

if __name__ == "__main__":
    main()
