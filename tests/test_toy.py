"""The built-in toy review set: deterministic, disjoint splits, labels that need word order."""

from __future__ import annotations

from collections import defaultdict

from transformer_attention.data import make_toy_splits
from transformer_attention.data.toy import TUTORIAL


def test_deterministic_and_disjoint():
    a, b = make_toy_splits(1000, seed=3), make_toy_splits(1000, seed=3)
    assert a == b
    assert make_toy_splits(1000, seed=4) != a
    texts = {k: set(v["text"]) for k, v in a.items()}
    assert not texts["train"] & texts["test"] and not texts["train"] & texts["validation"]
    assert not texts["validation"] & texts["test"]
    assert sum(len(v) for v in texts.values()) == 1000 + len(TUTORIAL)


def test_tutorial_sentences_in_train_with_their_labels():
    train = make_toy_splits(500)["train"]
    pairs = dict(zip(train["text"], train["label"], strict=True))
    for text, label in TUTORIAL:
        assert pairs[text] == label


def test_labels_balanced_and_order_dependent():
    splits = make_toy_splits(4000)
    labels = splits["train"]["label"]
    assert 0.4 < sum(labels) / len(labels) < 0.6
    pairs = dict(zip(splits["train"]["text"], splits["train"]["label"], strict=True))
    # negation flips: "x is good" and "x is not good" have opposite labels
    flips = [(t, t.replace(" is not ", " is ")) for t in pairs if " is not " in t and " but " not in t]
    checked = [(pairs[n], pairs[p]) for n, p in flips if p in pairs]
    assert checked and all(a != b for a, b in checked)
    # the same bag of words can carry both labels (contrast: the clause after "but" decides)
    by_bag = defaultdict(set)
    for text, label in pairs.items():
        by_bag[tuple(sorted(text.split()))].add(label)
    assert any(len(v) == 2 for v in by_bag.values())
