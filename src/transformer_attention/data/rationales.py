"""A dataset's rationales (`data.rationale_column`), the words known to decide each text, as one flag per
whitespace word: the analysis scores plausibility against them. A row holds a list of the deciding words or phrases
(matched lowercased, punctuation stripped) or one 0/1 flag per whitespace word; in a CSV cell, the list as JSON (a
plain string is split on spaces)."""

from __future__ import annotations

import json
import math
import reprlib
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import DataError

FIX = (
    'give a list of the deciding words (e.g. ["not", "good"]) or a 0/1 list with one flag per whitespace '
    "word of the text (e.g. [0, 1, 1]), or set data.rationale_column=null"
)


def _word(w: str) -> str:
    return w.strip(string.punctuation).lower()


def _missing(v: Any) -> bool:
    """A missing value: None, or NaN (how pandas reads an empty cell)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def _shown(value: Any) -> str:
    """`value` for an error line: its repr, cut to 80 characters (a review's flags are hundreds)."""
    shown = reprlib.Repr()
    shown.maxlist, shown.maxstring = 8, 60
    return shown.repr(value)


def rationale_flags(value: Any, text: str, where: str) -> list[bool]:
    """One bool per whitespace word of `text`; a DataError naming `where` (source, split, row) and the fix when
    `value` is neither form or does not fit the text."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip().startswith("[") else value.split()
        except json.JSONDecodeError:
            value = value.split()
    if hasattr(value, "tolist"):  # a NumPy array from parquet
        value = value.tolist()
    words = text.split()
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise DataError(f"{where}: rationale {_shown(value)} is not a list; {FIX}")
    if gap := [i for i, v in enumerate(value) if _missing(v)]:
        raise DataError(f"{where}: rationale has no value at position {gap[0]} of {len(value)}; {FIX}")
    if value and all(isinstance(v, bool | int | float) for v in value):  # flags: 0/1, true/false, 0.0/1.0
        if len(value) != len(words):
            raise DataError(
                f"{where}: rationale has {len(value)} flags for {len(words)} whitespace words of the text; {FIX}"
            )
        if bad := [(i, v) for i, v in enumerate(value) if v not in (0, 1)]:
            raise DataError(f"{where}: rationale flag {bad[0][1]!r} at word {bad[0][0]} is not 0 or 1; {FIX}")
        return [bool(v) for v in value]
    if not all(isinstance(v, str) for v in value):
        raise DataError(f"{where}: rationale {_shown(value)} mixes words and other values; {FIX}")
    present, flags, missing = [_word(w) for w in words], [False] * len(words), []
    for item in value:  # a word marks each of its occurrences; a phrase, each run of its words
        phrase = [_word(w) for w in item.split() if _word(w)]
        starts = [i for i in range(len(present) - len(phrase) + 1) if phrase and present[i : i + len(phrase)] == phrase]
        missing += [item] if phrase and not starts else []
        for i in starts:
            flags[i : i + len(phrase)] = [True] * len(phrase)
    if missing:
        unknown = _shown(missing)
        raise DataError(f"{where}: rationale words {unknown} are not words of the text {text[:60]!r}; {FIX}")
    return flags


def checked_rationales(values: Sequence[Any], texts: Sequence[str], where: str) -> list[list[bool] | None]:
    """`rationale_flags` of each row (None for a missing value, None or NaN, or a missing text), rows named
    from 0."""
    return [
        None if _missing(v) or not isinstance(t, str) else rationale_flags(v, t, f"{where} row {i}")
        for i, (v, t) in enumerate(zip(values, texts, strict=True))
    ]


def check_rationale_column(column: str | None, scrub_pii: bool) -> str | None:
    """`column`, refused with `scrub_pii` (scrubbing changes the words the rationales flag)."""
    if column is not None and scrub_pii:
        raise DataError(
            f"data.rationale_column={column!r} with data.scrub_pii=true: scrubbing changes the words the "
            "rationales flag; set data.scrub_pii=false or data.rationale_column=null"
        )
    return column


def rationales_by_text(raw: Mapping[str, Mapping[str, Sequence[Any]]]) -> Callable[[str], list[bool] | None]:
    """text -> its rationale (None for a text without one), over the splits of `raw` with a "rationale" column."""
    known = {t: r for cols in raw.values() for t, r in zip(cols["text"], cols.get("rationale", ()), strict=False)}
    return known.get
