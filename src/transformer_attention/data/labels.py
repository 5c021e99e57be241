"""Labels to class ids: int labels are ids already, string labels map to their index in the label names (sorted
string labels, a ClassLabel feature's names, or "0", "1", ...), which travel with the run and the checkpoint. A
label that cannot be an id is a DataError naming the split, the row and the value."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any

from ..errors import DataError

log = logging.getLogger(__name__)


def _kind(value: object) -> str:
    if value is None:
        return "missing"
    if isinstance(value, str):
        return "str"
    if isinstance(value, Integral) or (isinstance(value, Real) and float(value).is_integer()):
        return "int"
    return type(value).__name__


def check_integers_or_words(values: Iterable[str], where: str = "") -> None:
    """String labels are all integers (as a CSV reader may leave them) or all words: a mix is a DataError
    showing examples of both (`where`: the file, for the message)."""
    numbers: list[str] = []
    words: list[str] = []
    for value in values:
        kind = numbers if value.strip().lstrip("+-").isdigit() else words
        if value not in kind and len(kind) < 3:
            kind.append(value)
    if numbers and words:
        raise DataError(
            f"labels{where} mix integers and words: {', '.join(map(repr, numbers))} and "
            f"{', '.join(map(repr, words))}; make the label column all integers (class ids) or all class names"
        )


def label_names_fault(names: object, num_classes: object) -> str | None:
    """What keeps `names` from naming `num_classes` classes (one distinct name per class id), or None."""
    if not isinstance(names, list | tuple):
        return f"label names {names!r} are not a list"
    shown = [str(n) for n in names]
    if len(names) != num_classes:
        return f"{len(names)} label name(s), {shown}, for {num_classes} classes"
    if twice := sorted({n for n in shown if shown.count(n) > 1}):
        return f"label names {shown} give {', '.join(map(repr, twice))} to more than one class"
    return None


def labels_to_ids(
    labels: dict[str, list[Any]],
    label_names: list[str] | None = None,
    num_classes: int | None = None,
    class_names: list[str] | None = None,
    names_from: str = "data.label_names",
) -> tuple[dict[str, list[int]], list[str]]:
    """`{split: raw labels}` -> (`{split: ids}`, label names). `label_names` (given, e.g. from a checkpoint:
    `names_from` says which, for messages) win over the data's `class_names`; `num_classes`, when set, must
    agree with both. Without given names the train split must hold two classes or more."""
    if label_names and (fault := label_names_fault(list(label_names), len(label_names))):
        raise DataError(f"{names_from}: {fault}: give one distinct name per class")
    first: dict[str, tuple[str, int, object]] = {}  # kind -> (split, row, value) of its first occurrence
    for split, values in labels.items():
        for row, value in enumerate(values):
            first.setdefault(_kind(value), (split, row, value))
    if bad := sorted(set(first) - {"str", "int"}):
        split, row, value = first[bad[0]]
        raise DataError(f"label {value!r} ({bad[0]}) in split {split!r}, row {row}: labels must be ints or strings")
    if len(first) > 1:
        (s1, r1, v1), (s2, r2, v2) = first["int"], first["str"]
        raise DataError(
            f"labels mix types: int {v1!r} (split {s1!r}, row {r1}) and str {v2!r} (split {s2!r}, row {r2}); "
            f"make the label column all ints or all strings"
        )
    if "str" in first:  # not integer words mixed with other words (a CSV column holding `0`, `1`, `positive`)
        check_integers_or_words(value for values in labels.values() for value in values)
    from_checkpoint = bool(label_names) and not names_from.startswith("data.")
    found = sorted(set(labels.get("train", [])), key=str)
    if len(found) < 2 and not from_checkpoint:  # a model's classes are fixed: its test data may hold any of them
        what = f"one class, {found[0]!r}, in all {len(labels['train'])} rows" if found else "no labels"
        raise DataError(
            f"the train split holds {what}: a classifier needs two classes or more; "
            f"check data.label_column and the files (or data.split_names)"
        )
    if "str" in first:
        names = list(label_names) if label_names else sorted(set(labels["train"]))
        index = {name: i for i, name in enumerate(names)}
        for split, values in labels.items():
            for row, value in enumerate(values):
                if value not in index:
                    where = f"the classes of {names_from}" if label_names else "the train split's labels"
                    raise DataError(f"label {value!r} in split {split!r}, row {row} is not among {where}: {names}")
        ids = {split: [index[v] for v in values] for split, values in labels.items()}
    else:
        ids = {split: [int(v) for v in values] for split, values in labels.items()}
        names = list(label_names or class_names or [])
        if not names:
            n = num_classes or 1 + max((max(v) for v in ids.values() if v), default=0)
            names = [str(i) for i in range(n)]
    n = len(names)
    if num_classes is not None and num_classes != n:
        raise DataError(f"data.num_classes={num_classes} but the labels are {n} classes: {names}")
    for split, values in ids.items():
        for row, value in enumerate(values):
            if 0 <= value < n:
                continue
            if from_checkpoint:
                raise DataError(
                    f"label {value} in split {split!r}, row {row} is not a class of {names_from}, which has {n} "
                    f"classes (ids 0 to {n - 1}): use data labelled with that model's classes"
                )
            if label_names and value > 0:  # names given for fewer classes than the labels hold
                top = max(max(v) for v in ids.values() if v)
                raise DataError(
                    f"{names_from}={names} names {n} class(es), but label {value} (split {split!r}, row {row}) "
                    f"is class {value + 1}: give one name per class id, 0 to {top}"
                )
            raise DataError(
                f"label {value} in split {split!r}, row {row} is outside [0, {n}) ({n} classes); unlabelled "
                "splits (label -1) cannot be used: leave them out with data.split_names, or set "
                "data.num_classes / data.label_names to cover every label"
            )
    if missing := sorted(set(range(n)) - set(ids["train"])):
        log.warning("classes %s (%s) have no training example", missing, [names[i] for i in missing])
    return ids, names


def names_or_ids(names: Iterable[object] | None, num_classes: int) -> list[str]:
    """The label names to show for `num_classes` classes: `names` as strings, or the class ids when there are none."""
    return [str(n) for n in names] if names else [str(c) for c in range(num_classes)]
