"""Validation carved from train shares no text with it: train rows that contain, or are contained in, a
validation text (normalized: case, whitespace) are dropped and counted; a data set's own validation is kept."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import datasets
import pandas as pd
import pytest

from transformer_attention.data import DataError, ReviewDataModule
from transformer_attention.data.datamodule import _PREFIX, _rows_sharing_text

ADJECTIVES = ["superb", "dull", "moving", "clumsy", "sharp", "tedious", "warm", "flat", "bold", "hollow"]
NOUNS = ["acting", "plot", "score", "dialogue", "cast", "script", "pacing", "soundtrack", "lighting", "editing"]


@pytest.fixture(autouse=True)
def hf_cache(tmp_path_factory, monkeypatch):
    """Keep the Arrow files `datasets` makes from test data out of the user's cache."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.getbasetemp() / "hf_datasets"))


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def shares_text(a: str, b: str) -> bool:
    """The reference: one normalized text inside the other, checked the slow way."""
    a, b = norm(a), norm(b)
    return a in b or b in a


def sentence(i: int) -> str:
    # the id token q<ii>z is in no other sentence, so sentences never contain one another
    adj, noun = ADJECTIVES[i % 10], NOUNS[(i * 3) % 10]
    return f"film q{i:02d}z has {adj} {noun} and a {ADJECTIVES[(i + 4) % 10]} ending"


def phrase_level_rows() -> tuple[list[str], list[str]]:
    """SST-2-like rows: 24 sentences with two phrases each and, for 8 of them, a shouted, oddly spaced copy;
    plus 30 sentences no other row shares text with. Returns (all texts, the 30 unrelated ones)."""
    texts = []
    for i in range(24):
        words = sentence(i).split()
        texts += [sentence(i), " ".join(words[:5]), " ".join(words[1:4])]
        if i % 3 == 0:
            texts.append("  " + "\t".join(sentence(i).upper().split()) + "\n")
    unrelated = [sentence(i) for i in range(24, 54)]
    return texts + unrelated, unrelated


def write_parquet(folder: Path, **splits: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, texts in splits.items():
        labels = [i % 2 for i in range(len(texts))]
        pd.DataFrame({"text": texts, "label": labels}).to_parquet(folder / f"{split}.parquet")
    return folder


def module(path: Path, **kw) -> ReviewDataModule:
    kw = {"vocab_size": 200, "min_frequency": 1, "batch_size": 8, "cache_dir": None, **kw}
    return ReviewDataModule(name="local", path=str(path), **kw)


def test_carved_validation_removes_train_rows_sharing_its_text(tmp_path, caplog):
    texts, unrelated = phrase_level_rows()
    dm = module(write_parquet(tmp_path, train=texts), val_fraction=0.25)
    with caplog.at_level(logging.WARNING):
        dm.setup("fit")
    train, val = dm.raw["train"]["text"], dm.raw["validation"]["text"]
    assert len(val) == int(len(texts) * 0.25) and not set(train) & set(val)

    assert not [(t, v) for t in train for v in val if shares_text(t, v)]
    expected = [t for t in texts if t not in val and not any(shares_text(t, v) for v in val)]
    assert train == expected  # every row that shares no text with validation kept, in order
    assert [t for t in unrelated if t not in val] == [t for t in train if t in unrelated]
    removed = len(texts) - len(val) - len(train)
    assert removed > 0
    message = (
        f"validation carved from train: removed {removed} of {len(texts) - len(val)} train rows that contain, "
        "or are contained in, a validation text"
    )
    assert message in caplog.text
    assert dm.splits["train"].texts == train and len(dm.splits["train"]) == len(train)

    # rows removed only because case and whitespace are ignored: the raw strings share no text
    gone = [t for t in texts if t not in val and t not in train]
    by_case_or_space = [t for t in gone if not any(t in v or v in t for v in val)]
    assert by_case_or_space, "the seeded carve should leave a shouted or oddly spaced copy to remove"


def test_carving_is_stable_across_runs(tmp_path):
    texts, _ = phrase_level_rows()
    folder = write_parquet(tmp_path, train=texts)
    first, second = module(folder, val_fraction=0.25), module(folder, val_fraction=0.25)
    first.setup("fit")
    second.setup("fit")
    assert first.raw["train"] == second.raw["train"] and first.raw["validation"] == second.raw["validation"]


def test_case_whitespace_contains_and_contained():
    long_val = "an opening line that runs on " + "and on " * 20 + "until it ends"
    assert len(long_val) > 2 * _PREFIX
    train = [
        "The cat sat on the mat today",  # contains "the cat sat"
        "cat sat",  # contained in "the cat sat"
        "A DOG   barked\tloudly",  # contains "dog", other case and spacing
        "  THE\nCAT   sat ",  # equal once normalized
        "zebras graze",  # nothing shared
        long_val[:-5] + "there",  # same first _PREFIX characters as a validation text, then differs
        "Quote: " + long_val.upper() + "!",  # contains a long validation text
        long_val[10:-10],  # a long text inside a long validation text
        "catsat",  # not a substring once spaces are kept: "cat sat" is
    ]
    val = ["the cat sat", "Dog", long_val]
    assert _rows_sharing_text(train, val) == [0, 1, 2, 3, 6, 7]
    assert _rows_sharing_text(["no overlap here"], ["something else"]) == []


def test_own_validation_split_is_left_untouched(tmp_path, caplog):
    texts, _ = phrase_level_rows()
    validation = [sentence(i) for i in range(8)] + ["FILM Q09Z HAS"]  # shares text with many train rows
    dm = module(write_parquet(tmp_path, train=texts, validation=validation))
    with caplog.at_level(logging.INFO):
        dm.setup("fit")
    assert dm.raw["train"]["text"] == texts
    assert dm.raw["validation"]["text"] == validation
    assert "validation carved from train" not in caplog.text


def test_nothing_left_to_train_on_names_val_fraction(tmp_path):
    texts = [" ".join(w.upper() if i % 2 else w for w in ["a", "good", "film"]) + " " * i for i in range(10)]
    assert len({norm(t) for t in texts}) == 1 and len(set(texts)) == 10
    expected = re.escape("data.val_fraction=0.1: every one of the 9 train rows left after carving validation")
    with pytest.raises(DataError, match=expected + r".*lower data.val_fraction or give the data its own validation"):
        module(write_parquet(tmp_path, train=texts)).setup("fit")
