"""`SweepSummary`, a Hydra callback: at the end of every multirun, a table of its jobs, best first, printed and
written as `<sweep>/summary.csv` (what differs between jobs, the optimised metric, test/acc), then one line per job
that failed on bad input and a non-zero exit. It reads what each job left in its folder: any launcher works."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ..files import atomic_write, shown
from ..training.metrics import load_metrics
from .console import say
from .run import FAILED_FILE

SUMMARY_FILE = "summary.csv"


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(str(config.hydra.sweep.dir))
        metric = config.get("optimized_metric") or "test/acc"
        direction = (config.hydra.get("sweeper") or {}).get("direction") or "maximize"
        lower = (direction[0] if OmegaConf.is_list(direction) else direction) == "minimize" or "loss" in metric
        rows = summary_rows(sweep, metric, lower_is_better=lower)
        if not rows:
            return
        out = io.StringIO()
        csv.writer(out).writerows([list(rows[0]), *(list(row.values()) for row in rows)])
        atomic_write(sweep / SUMMARY_FILE, out.getvalue())
        table, written = to_table(rows), shown(sweep / SUMMARY_FILE)
        say(f"sweep summary ({shown(sweep)}), best first by {metric}:\n{table}\nwritten to {written}")
        if failed := failures(sweep):  # one line per failed job, then a non-zero exit (no traceback)
            lines = [f"job {n} ({', '.join(o) or 'no overrides'}) failed: {error}" for n, o, error in failed]
            raise SystemExit("\n".join([*lines, f"{len(failed)} of {len(rows)} jobs failed"]))


def summary_rows(sweep: Path, metric: str, lower_is_better: bool = False) -> list[dict[str, str]]:
    """One row per job folder of `sweep`, best `metric` first, jobs without a result (failed, stopped) last."""
    jobs = []
    for folder in sorted(p for p in sweep.iterdir() if (p / ".hydra" / "overrides.yaml").is_file()):
        written = OmegaConf.load(folder / ".hydra" / "overrides.yaml")
        overrides = dict(str(o).lstrip("+~").split("=", 1) for o in written)
        digits = re.match(r"\d+", folder.name)
        jobs.append((int(digits.group()) if digits else -1, folder, overrides, load_metrics(folder) or {}))
    varied = sorted({k for _, _, o, _ in jobs for k in o if len({str(j[2].get(k)) for j in jobs}) > 1})
    sign = 1 if lower_is_better else -1
    jobs.sort(key=lambda j: (j[3].get(metric) is None, sign * (j[3].get(metric) or 0), j[0]))  # best first
    rows = []
    for number, folder, overrides, metrics in jobs:
        status = "done" if metrics else "failed" if (folder / FAILED_FILE).is_file() else "no result (see its log)"
        row = {"job": str(number), "status": status}
        row.update({k: overrides.get(k, "") for k in varied})
        row.update({n: "" if metrics.get(n) is None else f"{metrics[n]:.4f}" for n in (metric, "test/acc")})
        row["folder"] = folder.name
        rows.append(row)
    return rows


def failures(sweep: Path) -> list[tuple[int, list[str], str]]:
    """(job number, its overrides, `<kind>: <message>`) of every job of `sweep` that failed on bad input."""
    out = []
    for record in sorted(sweep.glob(f"*/{FAILED_FILE}")):
        error = json.loads(record.read_text())
        number = re.match(r"\d+", record.parent.name)
        overrides = [str(o) for o in OmegaConf.load(record.parent / ".hydra" / "overrides.yaml")]
        out.append((int(number.group()) if number else -1, overrides, f"{error['kind']}: {error['message']}"))
    return sorted(out)


def to_table(rows: list[dict[str, str]]) -> str:
    """The rows under their names as aligned text columns, the folder last and unpadded."""
    names = list(rows[0])
    table = [dict(zip(names, names, strict=True)), *rows]
    widths = {n: max(len(r[n]) for r in table) for n in names[:-1]}
    return "\n".join("  " + "  ".join([*(r[n].ljust(widths[n]) for n in names[:-1]), r[names[-1]]]) for r in table)
