"""Every run of a recipe search, read from the runs' own logs: pretraining runs (held-out MLM accuracy and loss,
steps, minutes) and training runs (where the encoder started, best validation accuracy, test accuracy when the
run was tested, minutes).

    python benchmarks/recipes.py outputs/pretrain/runs/<time> outputs/train/runs/<time> ... \\
        [--json benchmarks/results/recipes.json]

Folders may be runs or sweeps (every run below is read). Nothing is trained here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _last(frame: pd.DataFrame, column: str) -> float | None:
    values = frame[column].dropna() if column in frame else []
    return round(float(values.iloc[-1]), 4) if len(values) else None


def _minutes(run: Path) -> float | None:
    """From the first to the last write of the run's files (the run's own log and checkpoints)."""
    files = [p for p in run.rglob("*") if p.is_file() and ".cache" not in p.parts]
    if not files:
        return None
    times = [p.stat().st_mtime for p in files]
    return round((max(times) - min(times)) / 60, 1)


def _start(config: dict) -> str:
    """Where the encoder started: scratch, a file, or `pretrain:<method>` (made or read from the cache)."""
    init_from = (config.get("model") or {}).get("init_from") or "scratch"
    method = (config.get("pretrain") or {}).get("method", "mlm")
    return f"pretrain:{method}" if init_from == "pretrain" else init_from


def describe(run: Path) -> dict:
    # every version: a run that went on in its folder (a resume, a train=false test) logged to the next one
    versions = sorted(run.glob("csv/version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    frame = pd.concat([pd.read_csv(p) for p in versions], ignore_index=True)
    config_file = run / ".hydra" / "config.yaml"
    config = yaml.safe_load(config_file.read_text()) if config_file.exists() else {}
    overrides_file = run / ".hydra" / "overrides.yaml"
    overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.exists() else []
    row = {"run": str(run), "overrides": overrides, "minutes": _minutes(run)}
    if "val/mlm_acc" in frame:
        best = frame["val/mlm_loss"].idxmin()
        row |= {
            "kind": "pretrain",
            "val_mlm_acc_best_loss": round(float(frame.loc[best, "val/mlm_acc"]), 4),
            "val_mlm_loss_best": round(float(frame.loc[best, "val/mlm_loss"]), 4),
            "steps": int(frame["step"].max()),
        }
    else:
        row |= {
            "kind": "train",
            "init_from": _start(config),
            "seed": config.get("seed"),
            "val_acc_best": _last(frame, "val/acc_best"),
            "test_acc": _last(frame, "test/acc"),
        }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "recipes.json")
    args = parser.parse_args()
    rows = []
    for folder in args.folders:
        for run in sorted({p.parents[2] for p in folder.glob("**/csv/version_*/metrics.csv")}):
            rows.append(describe(run))
            r = rows[-1]
            if r["kind"] == "pretrain":
                what = f"MLM acc {r['val_mlm_acc_best_loss']} loss {r['val_mlm_loss_best']} at {r['steps']} steps"
            else:
                what = f"from {r['init_from']}: val {r['val_acc_best']} test {r['test_acc']}"
            print(f"{r['kind']:<9} {r['minutes']!s:>6} min  {what}  {' '.join(map(str, r['overrides']))}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
