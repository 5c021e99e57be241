"""A run's metrics: printed at its end (`format_metrics`), and read back from its `metrics.csv` (Lightning's
CSVLogger, conf/logger/csv.yaml) with the standard library only, so scripts and notebooks read a run without
TensorBoard's event reader."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from ..errors import printable


def metrics_files(run_dir: str | Path) -> list[Path]:
    """`<run>/csv/version_<n>/metrics.csv` in version order (a run resumed in its folder adds a version)."""
    files = Path(run_dir).glob("csv/version_*/metrics.csv")
    return sorted(files, key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))


def read_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    """Every row of the run's metrics files, oldest first: `{"step": ..., "<name>": value, ...}` with
    the names each row logged (a CSV row leaves the others empty)."""
    rows = []
    for path in metrics_files(run_dir):
        with path.open(newline="") as f:
            rows += [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]
    return rows


def final_metrics(run_dir: str | Path) -> dict[str, float]:
    """The last value logged of each metric (what a run's `final metrics` print shows, and more)."""
    final: dict[str, float] = {}
    for row in read_metrics(run_dir):
        final.update({k: v for k, v in row.items() if k not in ("step", "epoch") and not math.isnan(v)})
    if not final:
        raise FileNotFoundError(f"no metrics in {run_dir}/csv/version_*/metrics.csv: was logger.csv switched off?")
    return final


def format_metrics(metrics: dict[str, float]) -> str:
    """One `  name  value` line per metric, sorted: what `final metrics` and `test metrics` print."""
    return "\n".join(f"  {printable(k):<16} {v:.4f}" for k, v in sorted(metrics.items()))  # names hold labels
