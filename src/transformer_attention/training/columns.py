"""HPARAMS' experiment: the columns TensorBoard's HPARAMS tab shows for every run it reads, and which are checked.

TensorBoard takes the first experiment summary it finds for all the runs it shows, checks the first five columns
marked `differs` (by name) and the first five metrics; where more than five settings differ, the five marked are
the model's, then the trainer's, ..., the data's last (`rank`). So a task's train runs share one experiment, in
`<root>/hparams/` (root: `outputs/train`), rewritten by each run from what every run under the root recorded
(`<run>/RECORD`): a column differs where their values differ (a run alone: what it changes from the defaults)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from tensorboard.summary.writer.record_writer import RecordWriter
from torch.utils.tensorboard.summary import hparams

from ..files import atomic_write, hold_lock, release_lock
from ..plotting.tags import tensorboard_tag

RECORD = "hparams_columns.json"  # a run's HPARAMS values, differing keys and metrics, beside its event file
FOLDER = "hparams"  # under the root: the experiment's own TensorBoard run
MISSING = "none"  # a setting a run lacks or leaves unset: parallel coordinates drops a run without a value


TICKED = 5  # the columns HPARAMS ticks as it opens
RANKS = ("model.", "trainer.", "seed", "pretrain.", "data.")  # what most often tells runs apart, first


def rank(key: str) -> int:
    """Where `key` comes among differing settings when more than five differ: the model's first, the data's last."""
    return next((i for i, prefix in enumerate(RANKS) if key.startswith(prefix)), len(RANKS))


def experiment_summary(settings: Mapping[str, Any], differ: Sequence[str], metrics: Sequence[str]) -> Summary:
    """HPARAMS' experiment: the `settings` columns (`differ` checked), then `metrics`, shown by their own names
    (`test/acc`, written `~test/acc` in TensorBoard: plotting/tags.py)."""
    columns = {**{k: settings[k] for k in differ if k in settings}, **settings}  # the differing ones first
    experiment, _, _ = hparams(columns, dict.fromkeys(map(tensorboard_tag, metrics), 0.0))
    stored = experiment.value[0].metadata.plugin_data
    data = HParamsPluginData.FromString(stored.content)
    ticked = set(sorted(differ, key=rank)[:TICKED])  # TensorBoard ticks the first five marked, by name: these
    for info in data.experiment.hparam_infos:
        info.differs = info.name in ticked
    for info, name in zip(data.experiment.metric_infos, metrics, strict=True):
        info.display_name = name
    stored.content = data.SerializeToString()
    return experiment


def shared_columns(
    records: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The experiment over runs' `records` (the newest first): every run's columns, the keys whose values differ
    between them (one run: its own `differ`), every run's metrics."""
    settings: dict[str, Any] = {}
    for record in records:
        settings.update({k: v for k, v in record["settings"].items() if k not in settings})
    if len(records) == 1:
        differ = list(records[0]["differ"])
    else:
        seen = {k: {str(r["settings"].get(k, MISSING)) for r in records} for k in settings}
        differ = [k for k in settings if len(seen[k]) > 1]
    metrics = list(dict.fromkeys(m for record in records for m in record["metrics"]))
    return settings, differ, metrics


def record_columns(
    run: Path, root: Path, settings: Mapping[str, Any], differ: Sequence[str], metrics: Sequence[str]
) -> Path:
    """Record this run's columns in `run`, then write the experiment of every run recorded under `root` to
    `<root>/hparams/` (the one event file there, replaced): the file written."""
    own = {"settings": dict(settings), "differ": list(differ), "metrics": list(metrics)}
    atomic_write(run / RECORD, json.dumps(own, indent=1))
    folder = root / FOLDER
    lock = hold_lock(folder / ".lock", wait=True)  # sweep jobs run at once with hydra/launcher=joblib
    try:
        records = [own]
        for path in sorted(root.glob(f"**/{RECORD}")):
            if path.parent.resolve() != run.resolve():
                try:
                    records.append(json.loads(path.read_text()))
                except (OSError, ValueError):  # a run folder being deleted
                    continue
        summary = experiment_summary(*shared_columns(records))
        now = time.time()
        events = [Event(wall_time=now, file_version="brain.Event:2"), Event(wall_time=now, summary=summary)]
        target = folder / f"events.out.tfevents.{now:.6f}.{FOLDER}"

        def write(f) -> None:
            for event in events:
                RecordWriter(f).write(event.SerializeToString())

        atomic_write(target, write)
        for old in folder.glob("events.out.tfevents.*"):
            if old != target:
                old.unlink(missing_ok=True)
    finally:
        release_lock(lock)
    return target
