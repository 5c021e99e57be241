"""Where review data comes from (a Hugging Face hub name, local files named by split, a save_to_disk folder), read
through `datasets` into plain columns per split; a missing column or train split, or an unreadable file, is a
DataError that names the value and the fix, before any training."""

from __future__ import annotations

import glob
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import DataError
from .files import check_file
from .labels import check_integers_or_words
from .rationales import checked_rationales

log = logging.getLogger(__name__)

# One split's columns: {"text": [...], "label": [...]} (and "rationale" with a rationale column); labels are the
# data's own values (ints, strings) until labels.py maps them to class ids.
Columns = dict[str, list[Any]]

# file names and hub split names that mean one of our three splits
SPLIT_ALIASES = {
    **dict.fromkeys(("train", "training"), "train"),
    **dict.fromkeys(("validation", "valid", "val", "dev"), "validation"),
    **dict.fromkeys(("test", "testing"), "test"),
}
FORMATS = {".parquet": "parquet", ".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json"}


def local_hint(name: str | None = None) -> str:
    """How to give data set `name` (a hub name; None: any) as local files: its own name, no machine's paths."""
    what = name.rsplit("/", 1)[-1] if name not in (None, "", "local") else "the data"
    return (
        f"data.path=<a folder holding {what} as train/validation/test .parquet, .csv or .json files, or as a "
        "save_to_disk folder>, or data.data_files='{train: <train file>, test: <test file>}'"
    )


def load_columns(
    name: str | None,
    path: str | None,
    data_files: Any,
    text_column: str,
    label_column: str,
    split_names: dict[str, str | None] | None = None,
    encoding: str = "utf-8",
    rationale_column: str | None = None,
) -> tuple[dict[str, Columns], list[str] | None]:
    """Raw splits as `{split: {"text": [...], "label": [...]}}` (and "rationale": one flag per whitespace word,
    with `rationale_column`), plus the label feature's class names if any."""
    source, dsets = load_source(name, path, data_files, encoding, label_column)
    dsets = our_splits(source, dsets, split_names)
    raw: dict[str, Columns] = {}
    class_names: list[str] | None = None
    for split, d in dsets.items():
        if len(d) == 0:
            raise DataError(f"split {split!r} of {source} has no rows: add rows, or leave that split out")
        roles = (("text", text_column), ("label", label_column), ("rationale", rationale_column))
        for role, column in [(r, c) for r, c in roles if c is not None]:
            if column not in d.column_names:
                raise DataError(
                    f"data.{role}_column={column!r} is not a column of {source} (split {split!r}); "
                    f"columns present: {d.column_names}. Set data.{role}_column to one of them."
                )
        names = getattr(d.features[label_column], "names", None)  # a ClassLabel feature knows its names
        class_names = class_names or (list(names) if names else None)
        cols = d.select_columns([text_column, label_column]).to_dict()
        raw[split] = {"text": cols[text_column], "label": cols[label_column]}
        if rationale_column is not None:
            where = f"{source} split {split!r} column {rationale_column!r}"
            values = d.select_columns([rationale_column]).to_dict()[rationale_column]
            raw[split]["rationale"] = checked_rationales(values, cols[text_column], where)
    return raw, class_names


def load_source(
    name: str | None, path: str | None, data_files: Any, encoding: str = "utf-8", label_column: str | None = "label"
) -> tuple[str, dict[str, Any]]:
    """(a description of the source for messages, the `datasets` splits as loaded)."""
    if data_files:
        base = Path(path) if path else None
        if base is not None and not base.is_dir():
            raise DataError(f"data.path={path!r} is not a folder, so it cannot be the base of data.data_files")
        return _load_files(_resolve_data_files(data_files, base), encoding, label_column)
    if path:
        p = Path(path)
        if not p.exists():
            raise DataError(f"data.path={path!r} does not exist (relative paths start at {Path.cwd()})")
        if p.is_file():
            return _load_files({"train": [str(p)]}, encoding, label_column)
        if not p.is_dir():
            raise DataError(
                f"data.path={path!r} is not a regular file or a folder (a FIFO, socket or device): give a data file "
                "(csv, tsv, json, jsonl, parquet) or a folder of train.* / validation.* / test.* files"
            )
        if (p / "dataset_dict.json").exists() or (p / "state.json").exists():
            return _load_disk(p)
        return _load_files(_files_by_split(p), encoding, label_column)
    if name in ("local", "", None):
        needs = "needs data.path=<folder or file> or data.data_files=..."
        raise DataError(f"data.name={name!r} {needs}: {local_hint()}")
    return _load_hub(name)


def quiet_datasets() -> None:
    """No `datasets` progress bars where stderr is not a terminal (in a log they are lines of bar characters)."""
    import datasets

    if not sys.stderr.isatty():
        datasets.disable_progress_bars()


def _load_hub(name: str) -> tuple[str, dict[str, Any]]:
    import datasets

    quiet_datasets()
    try:
        return f"data.name={name!r}", datasets.load_dataset(name)
    except (ConnectionError, FileNotFoundError) as err:  # DatasetNotFoundError is a FileNotFoundError
        flags = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
        offline = any(os.environ.get(k, "").lower() in ("1", "true", "yes") for k in flags)
        why = "offline mode is on (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE) and it is not cached" if offline else str(err)
        raise DataError(
            f"data.name={name!r} could not be loaded from the Hugging Face hub: {why}; "
            f"point the config at local files instead: {local_hint(name)}"
        ) from err


def _load_disk(folder: Path) -> tuple[str, dict[str, Any]]:
    import datasets

    source = f"data.path={str(folder)!r}"
    try:
        loaded = datasets.load_from_disk(str(folder))
    except Exception as err:
        raise DataError(f"{source}: cannot read this save_to_disk folder: {type(err).__name__}: {err}") from err
    return source, loaded if isinstance(loaded, datasets.DatasetDict) else {"train": loaded}


def _load_files(
    files: dict[str, list[str]], encoding: str = "utf-8", label_column: str | None = "label"
) -> tuple[str, dict[str, Any]]:
    import datasets

    source = f"files {files}"
    formats = {FORMATS.get(Path(f).suffix.lower()) for fs in files.values() for f in fs}
    if None in formats or len(formats) != 1:
        raise DataError(f"{source}: give files of one format among {sorted(FORMATS)} (by extension)")
    fmt = formats.pop()
    assert fmt is not None  # refused just above
    labels = [v for fs in files.values() for f in fs for v in check_file(f, fmt, encoding, label_column)]
    check_integers_or_words(labels)  # the CSV files together: the type `datasets` would infer from one of them
    kwargs = {"sep": "\t"} if all(f.lower().endswith(".tsv") for fs in files.values() for f in fs) else {}
    if fmt != "parquet":
        kwargs["encoding"] = encoding
    quiet_datasets()
    try:
        return source, datasets.load_dataset(fmt, data_files=files, **kwargs)
    except Exception as err:
        root = _root_cause(err)  # datasets wraps the reader's error in DatasetGenerationError
        reason = " ".join(str(root).split())[:300]
        raise DataError(f"cannot read {source} as {fmt}: {type(root).__name__}: {reason}") from err


def _root_cause(err: BaseException) -> BaseException:
    while (below := err.__cause__ or (None if err.__suppress_context__ else err.__context__)) is not None:
        err = below
    return err


def _resolve_data_files(data_files: Any, base: Path | None) -> dict[str, list[str]]:
    """`data_files` (a path, a list, or {split: path or list}) as {split: [existing files]}."""
    if isinstance(data_files, (str, os.PathLike)):
        data_files = {"train": [data_files]}
    elif not hasattr(data_files, "items"):
        data_files = {"train": list(data_files)}
    out: dict[str, list[str]] = {}
    for split, value in data_files.items():
        patterns = [value] if isinstance(value, (str, os.PathLike)) else list(value)
        files: list[str] = []
        for pattern in patterns:
            full = str(base / pattern) if base is not None else str(pattern)
            matched = sorted(glob.glob(full)) if glob.has_magic(full) else ([full] if Path(full).is_file() else [])
            if not matched:
                what = (
                    "is not a regular file (a FIFO or device): give a file" if Path(full).exists() else "no such file"
                )
                raise DataError(f"data.data_files.{split}={str(pattern)!r}: {what} ({full!r})")
            files += matched
        out[split] = files
    return out


def _files_by_split(folder: Path) -> dict[str, list[str]]:
    """Data files under `folder` grouped by the split their name starts with (train-00000-of-00002.parquet)."""
    files: dict[str, list[str]] = {}
    found = []
    for f in sorted(folder.rglob("*")):
        if f.suffix.lower() not in FORMATS or any(part.startswith(".") for part in f.relative_to(folder).parts):
            continue
        found.append(str(f.relative_to(folder)))
        word = re.findall(r"^[a-z]*", f.stem.lower())[0]  # "train" of train-00000-of-00002
        if word in SPLIT_ALIASES:
            files.setdefault(word, []).append(str(f))
    if not files:
        raise DataError(
            f"data.path={str(folder)!r} holds no data files named by split (found: {found or 'none'}); name them "
            f"train.parquet, validation.parquet, test.parquet (or .csv, .tsv, .json, .jsonl), or set data.data_files"
        )
    return files


def our_splits(source: str, dsets: dict[str, Any], split_names: dict[str, str | None] | None) -> dict[str, Any]:
    """Rename the loaded splits to train / validation / test (by `split_names`, else by name)."""
    available, out = list(dsets.keys()), {}
    if split_names:
        for ours, theirs in split_names.items():
            if ours not in ("train", "validation", "test"):
                raise DataError(f"data.split_names has key {ours!r}; keys are train, validation, test")
            if theirs is None:
                continue
            if theirs not in dsets:
                raise DataError(f"data.split_names.{ours}={theirs!r}: {source} has splits {available}")
            out[ours] = dsets[theirs]
    else:
        for theirs, d in dsets.items():
            alias = SPLIT_ALIASES.get(theirs)
            if alias is None:
                log.info("%s: split %r is not train/validation/test, not used", source, theirs)
            elif alias in out:
                raise DataError(f"{source} has two {alias} splits among {available}; pick one with data.split_names")
            else:
                out[alias] = d
    out = {split: out[split] for split in ("train", "validation", "test") if split in out}
    if "train" not in out:
        raise DataError(
            f"{source} has no train split (splits: {available}); name a file train.*, "
            f"or map one with data.split_names='{{train: <split>}}'"
        )
    return out
