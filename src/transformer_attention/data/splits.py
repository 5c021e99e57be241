"""Splits made fit to train on: no empty texts (`drop_empty`), and, for data without a validation or test split
(IMDB has no validation; one file of your own has neither), one carved from train (`carve_split`) that shares
no text with it: the train rows equal to one of its texts, contained in one, or containing one of at least
MIN_CONTAINED_TOKENS tokens are removed (`rows_sharing_text`; the phrase-level case: SST-2's train rows are
phrases of the same sentences).
"""

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
    """The form texts are compared in for overlap: lowercase tokens joined by single spaces, padded with a
    space at each end (" " for a text without tokens)."""
    return " " + " ".join(_TOKEN.findall(text.lower())) + " "


def _n_tokens(normalized: str) -> int:
    """How many tokens a `_normalized` text holds (tokens have no spaces in them)."""
    return normalized.count(" ") - 1


class _PhraseFinder:
    """Which of many `_normalized` patterns occur in a `_normalized` text, on token boundaries (the patterns
    carry their padding spaces), in time linear in the text (Aho-Corasick, pyahocorasick), not one `in` per
    pattern: carving validation compares thousands of texts with tens of thousands."""

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
    """Indices of the train texts that share text with validation, compared as `_normalized` token strings:
    equal to a validation text, contained in one (any length: a phrase of a validation sentence leaks it into
    training), or containing one of at least `min_contained_tokens` tokens (a review quoting a validation
    review; shorter validation texts are fragments too common to ban, see MIN_CONTAINED_TOKENS)."""
    train_norm = [_normalized(t) for t in train_texts]
    val_norm = {_normalized(t) for t in val_texts}
    in_train = _PhraseFinder(train_norm)
    contained = {t for v in val_norm for t in in_train.iter(v)}  # train texts inside (or equal to) a validation one
    in_val = _PhraseFinder(v for v in val_norm if _n_tokens(v) >= min_contained_tokens)
    return [i for i, t in enumerate(train_norm) if t in contained or next(in_val.iter(t), None) is not None]


def carve_split(
    train: Columns, fraction: float, seed: int, split: str = "validation", setting: str = "data.val_fraction"
) -> Columns:
    """Move a `fraction` of `train` (columns of equal length), drawn with `seed`, into a `split` of its own (in
    place), then drop the train rows that contain, or are contained in, one of its texts (`rows_sharing_text`:
    phrase-level sets such as SST-2 hold phrases of the same sentences), so that split measures text the model
    has not trained on. Returns the new split's columns; `setting` names the fraction in messages."""
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
    """Carve the splits `raw` lacks from its train split, in place: a validation split (`val_fraction`, drawn
    with `seed`) and a test split (`test_fraction`, drawn with `seed + 1`; None: none)."""
    if "validation" not in raw:
        raw["validation"] = carve_split(raw["train"], val_fraction, seed)
    if "test" not in raw and test_fraction:
        raw["test"] = carve_split(raw["train"], test_fraction, seed + 1, "test", "data.test_fraction")
        log.info(
            "no test split: %d rows carved from train (data.test_fraction=%s)", len(raw["test"]["text"]), test_fraction
        )


def drop_empty(cols: Columns, split: str, text_column: str) -> Columns:
    """`cols` without its empty or whitespace-only texts, counted and logged (a warning), not an error; a split
    left with nothing, or a text column of something other than strings, is a DataError."""
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
