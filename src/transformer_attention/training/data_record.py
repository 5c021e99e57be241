"""What a checkpoint records of the data it was trained on (`recorded`), and the data settings evaluate.py reads
from that record, a `data=` group and `data.<key>=` overrides (`settings_from`), with the keys that differ from
what the model was trained on (`differences`), said in one line by the task."""

from __future__ import annotations

import inspect
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from hydra.utils import get_object

# where this machine keeps things, not what was trained on: never recorded, always this run's
MACHINE_KEYS = ("_target_", "cache_dir", "num_workers", "output_dir", "tokenizer", "label_names_from")
# which texts are read and how they are cut: a difference from the record changes what is measured
SOURCE_KEYS = ("name", "path", "data_files", "split_names", "text_column", "label_column", "toy_size")
MEASURED_KEYS = (
    *SOURCE_KEYS,
    *("encoding", "val_fraction", "test_fraction", "split_seed", "scrub_pii", "max_length"),
)


def recorded(data: Mapping[str, Any]) -> dict[str, Any]:
    """A run's data settings as a checkpoint keeps them: plain values, paths made absolute (evaluate.py may run in
    another folder), the defaults of its `_target_` filled in, less what belongs to the machine."""
    record = {k: v for k, v in {**_defaults(data.get("_target_")), **data}.items() if k not in MACHINE_KEYS}
    if isinstance(path := record.get("path"), str):
        record["path"] = _absolute(path)
    files = record.get("data_files")
    if files is not None and not (isinstance(path, str) and Path(record["path"]).is_dir()):  # else: path's own
        record["data_files"] = _absolute_files(files)
    return record


def _defaults(target: Any) -> dict[str, Any]:
    """The arguments `target` (a class's dotted name) takes by default; none for a name that does not import."""
    try:
        parameters = inspect.signature(get_object(str(target))).parameters.values()
    except (ImportError, ValueError, TypeError, AttributeError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(os.path.expanduser(path))


def _absolute_files(files: Any) -> Any:
    if isinstance(files, str):
        return _absolute(files)
    if isinstance(files, list):
        return [_absolute_files(f) for f in files]
    if isinstance(files, dict):
        return {split: _absolute_files(f) for split, f in files.items()}
    return files


def settings_from(
    record: Mapping[str, Any], given: Mapping[str, Any], explicit: Collection[str], group: bool
) -> dict[str, Any]:
    """The data settings to test with: the checkpoint's `record`, with the keys the command line sets (`explicit`,
    values from the composed `given`) on top. `group`: the command line picked a data group (`data=imdb`); when it
    names another source than the record's, its settings replace the record's, less the length the model was
    trained with (unless `data.max_length=` is given). What the machine decides (`cache_dir`, ...) is `given`'s."""
    ours, base = recorded(given), dict(record)
    if group and any(ours.get(k) != record.get(k) for k in SOURCE_KEYS if k not in explicit):
        base = {**ours, "max_length": record.get("max_length", ours.get("max_length"))}
    base.update({k: ours[k] for k in explicit if k in ours})
    base.update({k: given[k] for k in MACHINE_KEYS if k in given})
    return base


def differences(record: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """`data.<key>=<value> (trained: <value>)` for each key that changes what is measured: what the task says."""
    keys = [*MEASURED_KEYS, *(("seed",) if settings.get("name") == "toy" else ())]
    ours = recorded(settings)
    return [f"data.{k}={ours.get(k)} (trained: {record.get(k)})" for k in keys if ours.get(k) != record.get(k)]
