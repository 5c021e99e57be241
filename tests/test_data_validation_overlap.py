"""Validation carved from train shares no text with it, compared as lowercase word/punctuation tokens: train rows
equal to a validation text or contained in one (any length) are dropped, and so are train rows that contain a
validation text of at least MIN_CONTAINED_TOKENS tokens; the count is logged; a data set's own validation is kept."""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path

import datasets
import pandas as pd
import pytest

from transformer_attention.data import DataError, ReviewDataModule
from transformer_attention.data.splits import _PREFIX, MIN_CONTAINED_TOKENS
from transformer_attention.data.splits import rows_sharing_text as _rows_sharing_text

ADJECTIVES = ["superb", "dull", "moving", "clumsy", "sharp", "tedious", "warm", "flat", "bold", "hollow"]
NOUNS = ["acting", "plot", "score", "dialogue", "cast", "script", "pacing", "soundtrack", "lighting", "editing"]


@pytest.fixture(autouse=True)
def hf_cache(tmp_path_factory, monkeypatch):
    """Keep the Arrow files `datasets` makes from test data out of the user's cache."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.getbasetemp() / "hf_datasets"))


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text.lower())


def inside(small: str, big: str) -> bool:
    """`small`'s tokens are a contiguous run of `big`'s, checked the slow way (list slices, no strings)."""
    s, b = tokens(small), tokens(big)
    return bool(s) and any(b[i : i + len(s)] == s for i in range(len(b) - len(s) + 1))


def shares_text(train: str, val: str, min_tokens: int = MIN_CONTAINED_TOKENS) -> bool:
    """The reference rule: train contained in (or equal to) val, or containing a val text of `min_tokens`+ tokens."""
    return inside(train, val) or (len(tokens(val)) >= min_tokens and inside(val, train))


def sentence(i: int) -> str:
    # the id token q<ii>z is in no other sentence, so sentences never contain one another
    adj, noun = ADJECTIVES[i % 10], NOUNS[(i * 3) % 10]
    return f"film q{i:02d}z has {adj} {noun} and a {ADJECTIVES[(i + 4) % 10]} ending."


def phrase_level_rows() -> tuple[list[str], list[str]]:
    """SST-2-like rows: 24 sentences, each with phrases of 5, 3, 2 and 1 tokens (the 1-2 token ones are shared
    by several sentences), for 8 of them a shouted, oddly spaced copy; "." and "and a" rows; plus 30 sentences
    no other row is part of. Returns (all texts, the 30 unrelated ones)."""
    texts = [".", "and a"]
    for i in range(24):
        words = sentence(i).split()
        texts += [sentence(i), " ".join(words[:5]), " ".join(words[1:4]), " ".join(words[2:4]), words[3]]
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
    return ReviewDataModule(name="local", path=str(path), **{"test_fraction": None, **kw})  # train keeps the rest


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
    assert 0 < removed < len(texts) - len(val) - len(unrelated)
    message = (
        f"validation carved from train: removed {removed} of {len(texts) - len(val)} train rows that contain, "
        "or are contained in, a validation text"
    )
    assert message in caplog.text
    assert dm.splits["train"].texts == train and len(dm.splits["train"]) == len(train)

    # the seeded carve exercises every part of the rule:
    short_val = [v for v in val if len(tokens(v)) < MIN_CONTAINED_TOKENS]
    kept_containing_short = [t for t in train if any(inside(v, t) for v in short_val)]
    assert kept_containing_short, "train sentences holding a 1-2 token validation row are kept"
    gone = [t for t in texts if t not in val and t not in train]
    assert [t for t in gone if len(tokens(t)) < MIN_CONTAINED_TOKENS], "short train phrases of a validation text go"
    assert [t for t in gone if any(inside(v, t) and v != t for v in val)], "train sentences holding a 3+ token one go"
    # rows removed only because case, spacing and punctuation spacing are ignored: the raw strings share no text
    assert [t for t in gone if not any(t in v or v in t for v in val)]


def test_carving_is_stable_across_runs(tmp_path):
    texts, _ = phrase_level_rows()
    folder = write_parquet(tmp_path, train=texts)
    first, second = module(folder, val_fraction=0.25), module(folder, val_fraction=0.25)
    first.setup("fit")
    second.setup("fit")
    assert first.raw["train"] == second.raw["train"] and first.raw["validation"] == second.raw["validation"]


def test_whole_tokens_contains_and_contained():
    assert MIN_CONTAINED_TOKENS == 3
    long_val = "an opening line that runs on " + "and on " * 20 + "until it ends"
    assert len(long_val) > 2 * _PREFIX
    val = ["the cat sat", "Dog", "not good", "What a film!", "a", long_val]
    train = [
        "The cat sat on the mat today",  # 0: contains "the cat sat" (3 tokens)
        "cat sat",  # 1: contained in "the cat sat"
        "A DOG   barked\tloudly",  # contains "dog": 1 token, too short to ban
        "  THE\nCAT   sat ",  # 3: equal once normalized
        "zebras graze",  # nothing shared
        long_val[:-5] + " there",  # same first _PREFIX characters as a validation text, then differs
        "Quote: " + long_val.upper() + "!",  # 6: contains a long validation text
        " ".join(long_val.split()[3:-2]),  # 7: a run of words inside a long validation text
        "catsat",  # no token "catsat" in "the cat sat"
        "bathe cat sate",  # holds "the cat sat" as characters, not as words
        "at sa",  # a piece of "the cat sat" as characters, not as words
        "this is not good at all",  # contains "not good": 2 tokens, too short to ban
        "Not  GOOD",  # 12: equal to a 2-token validation text
        "not",  # 13: contained in "not good"
        "what a film !!",  # 14: contains "what a film !" (4 tokens, "!" one of them)
        "film!",  # 15: contained in "what a film!": punctuation is a token
        "a bad film",  # "a" is a validation row of 1 token; "a" in "bad" is no match either
        "A",  # 17: equal to the 1-token validation text "a"
        long_val[4:40],  # a run of the long text that starts inside a word ("pening line ...")
    ]
    assert _rows_sharing_text(train, val) == [0, 1, 3, 6, 7, 12, 13, 14, 15, 17]
    # the threshold is what spares the short ones: at 1 token, "dog", "not good" and "a" ban the rows holding them
    assert _rows_sharing_text(train, val, min_contained_tokens=1) == [0, 1, 2, 3, 6, 7, 11, 12, 13, 14, 15, 16, 17]
    assert _rows_sharing_text(["no overlap here"], ["something else"]) == []


def test_matches_the_slow_reference_on_random_texts():
    rng = random.Random(0)
    vocab = ["a", "an", "ant", "the", "then", "good", "not", ".", ",", "!", "film", "films", "x" * 30]

    def text() -> str:
        n = rng.choice([1, 1, 2, 2, 3, 4, 6, 12, 25])
        words = [rng.choice(vocab) for _ in range(n)]
        return rng.choice([" ", "  ", "\t"]).join(w.upper() if rng.random() < 0.2 else w for w in words)

    val = [text() for _ in range(60)]
    # train: random texts, plus pieces cut from validation texts (on token boundaries) and sentences around them
    train = [text() for _ in range(300)]
    for v in val:
        words = tokens(v)
        i = rng.randrange(len(words))
        train += [" ".join(words[i : i + rng.randint(1, 4)]), f"{text()} {v} {text()}"]
    expected = [i for i, t in enumerate(train) if any(shares_text(t, v) for v in val)]
    assert _rows_sharing_text(train, val) == expected
    assert 0 < len(expected) < len(train)


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
    assert len({" ".join(tokens(t)) for t in texts}) == 1 and len(set(texts)) == 10
    expected = re.escape("data.val_fraction=0.1: every one of the 9 train rows left after carving validation")
    with pytest.raises(DataError, match=expected + r".*lower data.val_fraction or give the data its own validation"):
        module(write_parquet(tmp_path, train=texts)).setup("fit")
