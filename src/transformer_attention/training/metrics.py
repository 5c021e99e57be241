"""A run's metrics: printed at its end, kept in `metrics.json`, read back from its `metrics.csv` with the standard
library alone (no TensorBoard event reader)."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

from ..errors import printable
from ..files import atomic_write


def metrics_files(run_dir: str | Path) -> list[Path]:
    """`<run>/csv/version_<n>/metrics.csv` in version order (a run resumed in its folder adds a version)."""
    files = Path(run_dir).glob("csv/version_*/metrics.csv")
    return sorted(files, key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))


def read_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    """Every row of the run's metrics files, oldest first: `{"step": ..., "<name>": value, ...}` with
    the names each row logged (a CSV row leaves the others empty)."""
    records = []
    for path in metrics_files(run_dir):
        with path.open(newline="") as f:
            records += [{k: float(v) for k, v in r.items() if v not in ("", None)} for r in csv.DictReader(f)]
    return records


def final_metrics(run_dir: str | Path) -> dict[str, float]:
    """The last value logged of each metric (what a run's `final metrics` print shows, and more)."""
    final: dict[str, float] = {}
    for row in read_metrics(run_dir):
        final.update({k: v for k, v in row.items() if k not in ("step", "epoch") and not math.isnan(v)})
    if not final:
        raise FileNotFoundError(f"no metrics in {run_dir}/csv/version_*/metrics.csv: was logger.csv switched off?")
    return final


def shown_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics a run's final table shows: no learning rate, no last-step values (`train/loss_step`), and
    `train/loss` once (Lightning also keeps it as `train/loss_epoch`)."""
    return {
        k: v
        for k, v in metrics.items()
        if not (k.startswith("lr-") or k.split("/")[-1] == "lr" or "/lr/" in k or k.endswith("_step"))
        and not (k.endswith("_epoch") and k.removesuffix("_epoch") in metrics)
    }


RESULT_FILE = "metrics.json"  # in every train and evaluate run folder: what the run's final table shows, and more


def save_metrics(run_dir: str | Path, metrics: dict[str, float]) -> Path:
    """Write a run's final metrics to `<run>/metrics.json` (atomically): what a sweep's summary reads. A run
    that goes on in the folder (a resume, a `train=false` test) updates the metrics there, never drops one."""
    merged = {**(load_metrics(run_dir) or {}), **metrics}
    return atomic_write(Path(run_dir) / RESULT_FILE, json.dumps(merged, indent=1, sort_keys=True) + "\n")


def load_metrics(run_dir: str | Path) -> dict[str, float] | None:
    """A run's `metrics.json`, or None when it wrote none (it failed, was pruned or stopped)."""
    try:
        return json.loads((Path(run_dir) / RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None


def format_metrics(metrics: dict[str, float]) -> str:
    """The final table: one `  name  value` line per `shown_metrics` entry, sorted, names aligned, values to four
    significant digits (`0.9050`, `0.01234`)."""
    shown = {printable(k): v for k, v in shown_metrics(metrics).items()}  # names hold label names
    width = max(map(len, shown), default=0)
    return "\n".join(f"  {k:<{width}}  {_four_digits(v)}" for k, v in sorted(shown.items()))


def _four_digits(value: float) -> str:
    return f"{value:#.4g}".rstrip(".") if abs(value) < 1e4 else f"{value:.4g}"
