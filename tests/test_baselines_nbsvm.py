"""NBSVM in benchmarks/baselines.py: the naive-Bayes ratio against a hand computation, and its settings chosen on
validation alone."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

_spec = importlib.util.spec_from_file_location("baselines", ROOT / "benchmarks" / "baselines.py")
assert _spec and _spec.loader
baselines = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(baselines)


def test_nb_ratio_is_the_hand_computed_log_count_ratio() -> None:
    texts = ["Good film!", "good good fun", "bad film", "don't<br />"]
    vec = baselines.binary_ngrams(1)
    x = vec.fit_transform(baselines.clean(pd.Series(texts)))
    r = dict(zip(vec.get_feature_names_out(), baselines.nb_ratio(x, np.array([1, 1, 0, 0])), strict=True))
    # binarized counts in the positive rows: ! 1, film 1, good 2 (twice in one row counts once), fun 1;
    # negative rows: bad 1, film 1, don't 1; with alpha = 1 over the 6 features, |p|_1 = 6 + 5, |q|_1 = 6 + 3
    p = {"!": 2, "bad": 1, "don't": 1, "film": 2, "fun": 2, "good": 3}
    q = {"!": 1, "bad": 2, "don't": 2, "film": 2, "fun": 1, "good": 1}
    assert sorted(r) == sorted(p)  # words keep their apostrophes, punctuation is a token, <br /> is gone
    for word, ratio in r.items():
        assert ratio == pytest.approx(math.log((p[word] / 11) / (q[word] / 9)))


def _splits(seed: int) -> dict[str, pd.DataFrame]:
    """Reviews of random filler words with a sentiment word kept or flipped at random: noisy enough that
    the grid's settings differ on validation."""
    rng = np.random.default_rng(seed)
    filler = [f"w{i}" for i in range(30)]

    def split(n: int) -> pd.DataFrame:
        labels = rng.integers(0, 2, n)
        said = np.where(rng.random(n) < 0.75, labels, 1 - labels)
        texts = [" ".join([*rng.choice(filler, 6), ("great", "awful")[1 - s], "."]) for s in said]
        return pd.DataFrame({"text": texts, "label": labels})

    return {"train": split(120), "validation": split(60), "test": split(60)}


def test_settings_come_from_validation_and_test_is_read_once() -> None:
    splits = _splits(0)
    row = baselines.nbsvm("tiny", splits, 3)
    grid = row["val_grid"]
    assert [float(c) for c in grid] == list(baselines.NBSVM_C)
    best = max(v for by_beta in grid.values() for v in by_beta.values())
    assert row["val_acc"] == best == grid[str(row["C"])][str(row["beta"])]
    # other test labels and texts: the same choice, and the test accuracy of the flipped labels is its complement
    flipped = dict(splits, test=splits["test"].assign(label=1 - splits["test"]["label"]))
    again = baselines.nbsvm("tiny", flipped, 3)
    assert (again["C"], again["beta"], again["val_grid"]) == (row["C"], row["beta"], grid)
    assert again["test_acc"] == pytest.approx(1 - row["test_acc"])
    other = baselines.nbsvm("tiny", dict(splits, test=_splits(1)["test"]), 3)
    assert (other["C"], other["beta"], other["val_grid"]) == (row["C"], row["beta"], grid)
