"""`SweepSummary`: at the end of every multirun (a grid or an Optuna search), a table of its jobs, best first,
printed and written as `<sweep>/summary.csv`: each job's number, what it tried (the overrides that differ
between the jobs), the optimised metric, test/acc, and its folder; then one line per job that failed on bad
input, and a non-zero exit. A Hydra callback (conf/hydra/default.yaml);
it reads what each job left in its folder (`metrics.json`, `.hydra/overrides.yaml`), so it works with any
launcher."""

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
        atomic_write(sweep / SUMMARY_FILE, to_csv(rows))
        table, written = to_table(rows), shown(sweep / SUMMARY_FILE)
        print(f"sweep summary ({shown(sweep)}), best first by {metric}:\n{table}\nwritten to {written}")
        failed = failures(sweep)
        if failed:  # one line per failed job, then a non-zero exit (no traceback)
            lines = [
                f"job {n} ({', '.join(overrides) or 'no overrides'}) failed: {error}" for n, overrides, error in failed
            ]
            raise SystemExit("\n".join([*lines, f"{len(failed)} of {len(rows)} jobs failed"]))


def summary_rows(sweep: Path, metric: str, lower_is_better: bool = False) -> list[dict[str, str]]:
    """One row per job folder of `sweep` (those holding `.hydra/overrides.yaml`), best `metric` first; jobs
    without a result (failed, pruned, stopped) last."""
    jobs = []
    for folder in sorted(p for p in sweep.iterdir() if (p / ".hydra" / "overrides.yaml").is_file()):
        overrides = dict(str(o).lstrip("+~").split("=", 1) for o in OmegaConf.load(folder / ".hydra/overrides.yaml"))
        digits = re.match(r"\d+", folder.name)
        jobs.append((int(digits.group()) if digits else -1, folder, overrides, load_metrics(folder) or {}))
    varied = sorted({k for _, _, o, _ in jobs for k in o if len({str(j[2].get(k)) for j in jobs}) > 1})
    sign = 1 if lower_is_better else -1

    def rank(job: tuple) -> tuple:
        value = job[3].get(metric)
        return (value is None, sign * value if value is not None else 0.0, job[0])

    rows = []
    for number, folder, overrides, metrics in sorted(jobs, key=rank):
        status = "done" if metrics else "failed" if (folder / FAILED_FILE).is_file() else "no result (see its log)"
        row = {"job": str(number), "status": status}
        row.update({k: overrides.get(k, "") for k in varied})
        row.update({name: _value(metrics.get(name)) for name in dict.fromkeys((metric, "test/acc"))})
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


def _value(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def to_csv(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def to_table(rows: list[dict[str, str]]) -> str:
    """The rows as aligned text columns, the folder last and unpadded."""
    names = list(rows[0])
    widths = {n: max(len(n), *(len(r[n]) for r in rows)) for n in names[:-1]}
    lines = ["  ".join([*(n.ljust(widths[n]) for n in names[:-1]), names[-1]])]
    lines += ["  ".join([*(r[n].ljust(widths[n]) for n in names[:-1]), r[names[-1]]]) for r in rows]
    return "\n".join(f"  {line}" for line in lines)
