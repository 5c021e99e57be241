"""The data settings' value rules, written once: for `ReviewDataModule`'s arguments and the config pre-check's
`data.*`, before anything heavy is imported. Standard library only."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Mapping
from typing import Any

from ..checks import is_number, whole
from ..errors import DataError


def _fraction(value: Any) -> bool:
    return is_number(value) and 0 < value < 1


def _encoding(value: Any) -> bool:
    try:
        codecs.lookup(value)
    except (LookupError, TypeError):
        return False
    return True


AT_LEAST_ONE = "must be a whole number >= 1: e.g. {key}=2"

# key -> (whether a value is allowed, what the message says after `key=value`; {key} as the caller names it)
RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "batch_size": (whole(1), AT_LEAST_ONE),
    "vocab_size": (whole(1), AT_LEAST_ONE),
    "toy_size": (whole(1), AT_LEAST_ONE),
    "eval_batch_size": (whole(1, null=True), AT_LEAST_ONE),  # None: batch_size
    "max_length": (whole(2), "must be a whole number >= 2 (the [CLS] token and one word): e.g. {key}=128"),
    "num_workers": (whole(0), "must be 0 (load in the main process) or more: e.g. {key}=0"),
    "val_fraction": (_fraction, "must be in (0, 1): e.g. {key}=0.1"),
    "test_fraction": (
        lambda v: v is None or _fraction(v),
        "must be in (0, 1), or null to carve no test split: e.g. {key}=0.1",
    ),
    "encoding": (_encoding, "is not an encoding Python knows: e.g. {key}=utf-8 or {key}=latin-1"),
}


def check_data_settings(values: Mapping[str, Any], prefix: str = "") -> None:
    """A DataError naming `prefix + key`, the value and the fix for the first of `values` that breaks its rule."""
    for key, (allowed, rule) in RULES.items():
        if key in values and not allowed(values[key]):
            name = prefix + key
            raise DataError(f"{name}={values[key]!r} {rule.format(key=name)}")
