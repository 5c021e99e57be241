"""Splits fit to train on: no empty texts, and a validation or test split carved from train where the data has
none, sharing no text with it (SST-2's train rows are phrases of its sentences)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import ahocorasick
import torch

from ..errors import DataError

if TYPE_CHECKING:
    from .sources import Columns

log = logging.getLogger(__name__)

# Texts are compared as lowercase word tokens (a run of word characters, or one other non-space character),
# joined by single spaces, with one space before and after: " a good film . " holds " good " and " . ",
# not " goo " or " a g", so every match falls on token boundaries.
_TOKEN = re.compile(r"\w+|[^\w\s]")

# A train row is removed for *containing* a validation text only when that text has at least this many tokens:
# a 1-2 token validation row (".", "good", "not good"), common in phrase-level sets such as SST-2, is a
# fragment of countless unrelated sentences, and banning them all would empty train. Equal texts, and train
# rows *contained in* a validation text (a phrase of a validation sentence: the leak), count at any length.
MIN_CONTAINED_TOKENS = 3

# The automaton holds each text's first _PREFIX characters; a hit is confirmed with startswith. A trie of
# every whole IMDB train review took 20 s and 2 GB to build; of their prefixes, under a second.
_PREFIX = 64


def _normalized(text: str) -> str:
    """The form texts are compared in: lowercase tokens joined and padded by single spaces."""
    return " " + " ".join(_TOKEN.findall(text.lower())) + " "


class _PhraseFinder:
    """Which of many `_normalized` patterns occur in a `_normalized` text, in time linear in the text
    (Aho-Corasick), not one `in` per pattern: carving compares thousands of texts with tens of thousands."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.by_prefix: dict[str, list[str]] = {}
        for pattern in {p for p in patterns if p.strip()}:  # a text without tokens would be in every text
            self.by_prefix.setdefault(pattern[:_PREFIX], []).append(pattern)
        self.automaton = ahocorasick.Automaton()
        for prefix in self.by_prefix:
            self.automaton.add_word(prefix, prefix)
        if self.by_prefix:
            self.automaton.make_automaton()

    def iter(self, text: str) -> Iterator[str]:
        """The patterns found in `text`, once per place each starts."""
        if not self.by_prefix:
            return
        for end, prefix in self.automaton.iter(text):
            start = end - len(prefix) + 1
            for pattern in self.by_prefix[prefix]:
                if text.startswith(pattern, start):
                    yield pattern


def rows_sharing_text(
    train_texts: list[str], val_texts: list[str], min_contained_tokens: int = MIN_CONTAINED_TOKENS
) -> list[int]:
    """Indices of the train texts equal to a validation text, contained in one, or containing one of at least
    `min_contained_tokens` tokens (a review quoting a validation review)."""
    train_norm = [_normalized(t) for t in train_texts]
    val_norm = {_normalized(t) for t in val_texts}
    in_train = _PhraseFinder(train_norm)
    contained = {t for v in val_norm for t in in_train.iter(v)}  # train texts inside (or equal to) a validation one
    in_val = _PhraseFinder(v for v in val_norm if v.count(" ") - 1 >= min_contained_tokens)  # tokens in v
    return [i for i, t in enumerate(train_norm) if t in contained or next(in_val.iter(t), None) is not None]


def carve_split(
    train: Columns, fraction: float, seed: int, split: str = "validation", setting: str = "data.val_fraction"
) -> Columns:
    """Move a `fraction` of `train`, drawn with `seed`, into a `split` of its own (returned), then drop the train
    rows that share text with it (`rows_sharing_text`); `setting` names the fraction in messages."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(train["text"]), generator=g).tolist()
    n_out = max(1, int(len(perm) * fraction))
    if n_out >= len(perm):
        raise DataError(f"{setting}={fraction} of {len(perm)} train rows leaves none to train on")
    out_idx, train_idx = sorted(perm[:n_out]), sorted(perm[n_out:])
    carved = {k: [v[i] for i in out_idx] for k, v in train.items()}
    for k, v in list(train.items()):
        train[k] = [v[i] for i in train_idx]
    overlap = set(rows_sharing_text(train["text"], carved["text"]))
    if overlap:
        n_train = len(train["text"])
        if len(overlap) == n_train:
            raise DataError(
                f"{setting}={fraction}: every one of the {n_train} train rows left after carving {split} "
                f"contains, or is contained in, a {split} text, so none is left to train on; lower {setting} or "
                f"give the data its own {split} split (a {split} file, data.data_files.{split} or "
                f"data.split_names.{split})"
            )
        log.warning(
            "%s carved from train: removed %d of %d train rows that contain, or are contained in, a %s text "
            "(whole tokens; contained %s texts of %d+ tokens): they would leak %s text into training",
            *(split, len(overlap), n_train, split, split, MIN_CONTAINED_TOKENS, split),
        )
        for k, v in list(train.items()):
            train[k] = [x for i, x in enumerate(v) if i not in overlap]
    return carved


def carve_missing(raw: dict[str, Columns], val_fraction: float, test_fraction: float | None, seed: int) -> None:
    """Carve the validation (drawn with `seed`) and test split (`seed + 1`; none when `test_fraction` is None) that
    `raw` lacks from its train split, in place."""
    if "validation" not in raw:
        raw["validation"] = carve_split(raw["train"], val_fraction, seed)
    if "test" not in raw and test_fraction:
        raw["test"] = carve_split(raw["train"], test_fraction, seed + 1, "test", "data.test_fraction")
        log.info(
            "no test split: %d rows carved from train (data.test_fraction=%s)", len(raw["test"]["text"]), test_fraction
        )


def drop_empty(cols: Columns, split: str, text_column: str) -> Columns:
    """`cols` without its blank texts (a warning); a split left with nothing, or texts that are not strings, is a
    DataError."""
    texts = cols["text"]
    bad = next((t for t in texts if t is not None and not isinstance(t, str)), None)
    if bad is not None:
        raise DataError(
            f"data.text_column={text_column!r} holds {type(bad).__name__} values ({bad!r}) in split "
            f"{split!r}, not strings; set data.text_column to the column with the review text"
        )
    keep = [i for i, t in enumerate(texts) if t is not None and t.strip()]
    if len(keep) < len(texts):
        dropped = len(texts) - len(keep)
        log.warning("split %r: dropped %d empty or whitespace-only texts of %d", split, dropped, len(texts))
        if not keep:
            raise DataError(f"split {split!r} has no non-empty text in data.text_column={text_column!r}")
        cols = {k: [v[i] for i in keep] for k, v in cols.items()}
    return cols
