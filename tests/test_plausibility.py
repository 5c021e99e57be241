"""Plausibility as ERASER measures it: AUPRC, average precision and token F1 of each method's word scores against
the marked words (hand counts, scikit-learn as the oracle), one score per whitespace word however the tokenizer
cuts it, and ERASER's comprehensiveness and sufficiency with whole words removed, on reviews of movie length."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import SHARED_DATA
from sklearn.metrics import auc, average_precision_score, precision_recall_curve

from transformer_attention.analysis.plausibility import (
    ERASER_BINS,
    Rerun,
    add_plausibility,
    rationales_of,
    removal_scores,
    text_scores,
    top_words,
    word_rationale,
    word_scores,
)
from transformer_attention.analysis.report import Faithfulness
from transformer_attention.data.rationales import rationale_flags
from transformer_attention.data.tokenizer import MASK_ID, train_tokenizer
from transformer_attention.inference import probabilities
from transformer_attention.model.classifier import TransformerClassifier

MOVIES = SHARED_DATA / "movie_rationales"


def test_the_measures_by_hand():
    marked = np.array([True, False, True, False])
    assert text_scores(np.array([0.9, 0.1, 0.8, 0.2]), marked) == {
        "auprc": 1.0,
        "average_precision": 1.0,
        "token_f1": 1.0,
    }
    wrong = text_scores(np.array([0.1, 0.9, 0.2, 0.8]), marked)  # the marked words ranked 3rd and 4th
    assert wrong["average_precision"] == pytest.approx((1 / 3 + 2 / 4) / 2)  # precision at each hit, as steps
    # the curve's points (recall, precision): (1, 1/2), (1/2, 1/3), (0, 0), (0, 0), (0, 1): trapezoids between
    assert wrong["auprc"] == pytest.approx(0.5 * (1 / 2 + 1 / 3) / 2 + 0.5 * (1 / 3 + 0) / 2)
    assert wrong["token_f1"] == 0.0
    half = text_scores(np.array([0.9, 0.8, 0.7, 0.1]), marked)  # hits at ranks 1 and 3
    assert half["token_f1"] == 0.5  # top 2: one of the two marked words
    assert half["average_precision"] == pytest.approx((1 + 2 / 3) / 2)
    assert half["auprc"] == pytest.approx(0.5 * (2 / 3 + 1 / 2) / 2 + 0.5 * (1 + 1) / 2)
    assert text_scores(np.ones(4), np.ones(4, dtype=bool)) is None  # every word marked: no signal
    assert text_scores(np.ones(4), np.zeros(4, dtype=bool)) is None
    assert [top_words(q, 800) for q in ERASER_BINS] == [8, 40, 80, 160, 400]  # ERASER's int(k% x n)
    assert [top_words(q, 30) for q in ERASER_BINS] == [1, 1, 3, 6, 15]  # at least one word


def test_auprc_and_average_precision_equal_scikit_learns_with_ties_and_large_scores():
    rng = np.random.default_rng(0)
    checked = 0
    for n in (2, 3, 17, 60, 800):
        for _ in range(10):
            scores = np.round(rng.normal(size=n) * 40)  # ties, and logits a sigmoid would saturate
            marked = rng.random(n) < 0.3
            found = text_scores(scores, marked)
            if found is None:
                continue
            precision, recall, _ = precision_recall_curve(marked, scores)
            assert found["auprc"] == pytest.approx(auc(recall, precision), abs=1e-6)  # ERASER's auprc
            assert found["average_precision"] == pytest.approx(average_precision_score(marked, scores), abs=1e-6)
            top = np.argsort(-scores, kind="stable")[: marked.sum()]
            tp = marked[top].sum()  # ERASER's token F1 of the top-k words as a hard rationale
            assert found["token_f1"] == pytest.approx(2 * tp / (2 * tp + (len(top) - tp) + (marked.sum() - tp)))
            checked += 1
    assert checked > 30  # texts with some words marked and some not


def test_a_word_cut_into_pieces_scores_once_by_the_mean_of_its_pieces():
    text = "an unbelievably good film"
    whole = train_tokenizer([text] * 3, vocab_size=200, min_frequency=1)  # every word one token
    letters = train_tokenizer([text], vocab_size=30, min_frequency=1)  # a few letters' pieces only
    rows = [t.encode(text).ids for t in (whole, letters)]
    assert len(rows[0]) == 5 and len(rows[1]) > 10  # [CLS] and the same 4 words, cut into many pieces
    flags = [0, 1, 1, 0]
    (one, pieces) = (word_rationale(text, flags, t, len(r)) for t, r in zip((whole, letters), rows, strict=True))
    assert one.flags.tolist() == pieces.flags.tolist() == [False, True, True, False]
    assert [w.text for w in pieces.words[1:]] == text.split()
    unbelievably = pieces.words[2].tokens
    assert len(unbelievably) > 2
    tokens = np.zeros(len(rows[1]))
    tokens[unbelievably] = np.arange(len(unbelievably))  # the pieces 0, 1, 2, ...
    assert word_scores(tokens, pieces)[1] == pytest.approx((len(unbelievably) - 1) / 2)  # their mean
    # a score per word, copied onto each of its pieces: the same word scores however the words are cut
    per_word = np.array([0.3, 0.9, 0.1, 0.2])
    spread = [np.zeros(len(r)) for r in rows]
    for scores, found in zip(spread, (one, pieces), strict=True):
        for value, word in zip(per_word, found.words[1:], strict=True):
            scores[word.tokens] = value
    measured = [text_scores(word_scores(s, r), r.flags) for s, r in zip(spread, (one, pieces), strict=True)]
    assert measured[0] == measured[1] and measured[0]["token_f1"] == 0.5


def test_words_the_model_did_not_read_are_left_out():
    text = "good plot , bad acting and a dull end"
    tok = train_tokenizer([text], vocab_size=200, min_frequency=1)
    flags = [1, 0, 0, 1, 0, 0, 0, 1, 0]
    cut = word_rationale(text, flags, tok, 5)  # [CLS] and the first four words: the row as data.max_length cut it
    assert cut.flags.tolist() == [True, False, False, True] and len(cut.words) == 5
    assert word_rationale(text, flags, tok, 40) is None  # a row longer than the text: not this text's tokens


def tiny_net(vocab_size: int, max_len: int = 64, seed: int = 0) -> TransformerClassifier:
    """A small untrained classifier: what it predicts does not matter, only that the measures read it right."""
    torch.manual_seed(seed)
    kw = {"num_classes": 2, "d_model": 16, "num_heads": 2, "num_layers": 1, "max_len": max_len}
    return TransformerClassifier(vocab_size=vocab_size, **kw).eval()


@pytest.mark.parametrize("mask_id", [MASK_ID, None])
def test_eraser_comprehensiveness_and_sufficiency_remove_whole_words(mask_id: int | None):
    text = "an unbelievably good film , not a dull one"
    tok = train_tokenizer([text], vocab_size=40, min_frequency=1)  # words in pieces
    row = tok.encode(text).ids
    rationale = word_rationale(text, [0, 1, 1, 0, 0, 0, 0, 1, 0], tok, len(row))
    net = tiny_net(tok.get_vocab_size())
    per_word = np.array([0.0, 5.0, 1.0, 0.5, 0.2, 3.0, 0.1, 4.0, 0.3])  # order: 1, 7, 5, 2, 3, 8, 4, 6, 0
    scores = np.zeros(len(row))
    for value, word in zip(per_word, rationale.words[1:], strict=True):
        scores[word.tokens] = value
    (found,) = removal_scores(Rerun(net, [row], [1], mask_id), [{"m": scores}], [rationale])
    # by hand: the top int(k% x 9) words (at least one), each with all its pieces, removed or alone
    order = [1, 7, 5, 2, 3, 8, 4, 6, 0]
    comp, suff = [], []
    for q in ERASER_BINS:
        chosen = {p for w in order[: max(1, q * 9 // 100)] for p in rationale.words[w + 1].tokens}
        removed = [
            t if i not in chosen else mask_id for i, t in enumerate(row) if mask_id is not None or i not in chosen
        ]
        alone = [t if i in chosen or i == 0 else mask_id for i, t in enumerate(row)]
        alone = [t for t in alone if t is not None]
        p = probabilities(net, [row, removed, alone], batch_size=8)[:, 1]
        comp.append(p[0] - p[1])
        suff.append(p[0] - p[2])
    assert found["m"]["eraser_comprehensiveness"] == pytest.approx(np.mean(comp), abs=1e-6)
    assert found["m"]["eraser_sufficiency"] == pytest.approx(np.mean(suff), abs=1e-6)
    assert len(rationale.words[2].tokens) > 1  # "unbelievably", the first word removed, is several pieces


def test_plausibility_joins_the_report_for_texts_with_some_words_marked():
    texts = ["good film", "bad film", "dull plot", "fine plot"]
    tok = train_tokenizer(texts, vocab_size=100, min_frequency=1)
    rows = [tok.encode(t).ids for t in texts]
    marked = {"good film": [1, 0], "bad film": [0, 1], "dull plot": [1, 1]}  # the third: all marked, left out
    rationales = rationales_of(texts, rows, marked.get, tok)
    assert rationales[3] is None  # no rationale for this text
    right = [np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0]), np.zeros(3), np.zeros(3)]
    wrong = [np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0]), np.zeros(3), np.zeros(3)]
    attributions = [{"right": r, "wrong": w} for r, w in zip(right, wrong, strict=True)]
    report = Faithfulness(split="test", texts=4, removal="mask", k=[50.0], ig_error=0.0)
    report.scores = {
        m: {"aopc": 0.5, "comprehensiveness@50": 0.1, "comprehensiveness": 0.1} for m in ("right", "wrong")
    }
    report.scores = {m: s | {"sufficiency@50": 0.1, "sufficiency": 0.1} for m, s in report.scores.items()}
    report.sem = {m: {} for m in report.scores}
    net = tiny_net(tok.get_vocab_size())
    assert add_plausibility(report, attributions, rationales, Rerun(net, rows, [1, 1, 1, 1], MASK_ID)) == 2
    right_scores, wrong_scores = report.scores["right"], report.scores["wrong"]
    assert right_scores["auprc"] == right_scores["token_f1"] == 1.0 and wrong_scores["token_f1"] == 0.0
    # the curve (1, 1/2), (0, 0), (0, 1): one trapezoid of area 1/4, under the step of height 1/2
    assert wrong_scores["average_precision"] == 0.5 and wrong_scores["auprc"] == pytest.approx(0.25)
    assert report.sem["right"]["token_f1"] == 0.0
    for method in ("right", "wrong"):  # ERASER's measures on the two scored texts, removing whole words
        assert {"eraser_comprehensiveness", "eraser_sufficiency"} <= set(report.scores[method])
    table, summary = "\n".join(report.table()), "\n".join(report.summary())
    assert all(h in table for h in ("AUPRC", "token F1", "ERASER compr.", "ERASER suff.")), table
    assert "tok F1" in summary and "E.compr" in summary, summary


def test_a_review_of_800_words_is_scored_and_says_where_it_is(caplog: pytest.LogCaptureFixture):
    rng = np.random.default_rng(0)
    vocab = ["good", "bad", "film", "plot", "dull", "fine", "actor", "scene", ".", ",", "not", "the"]
    texts = [" ".join(rng.choice(vocab, size=800)) for _ in range(3)]
    tok = train_tokenizer(texts, vocab_size=100, min_frequency=1)
    rows = [tok.encode(t).ids[:1024] for t in texts]
    assert all(len(r) == 801 for r in rows)  # [CLS] and 800 one-token words
    flags = {t: [w in ("good", "bad") for w in t.split()] for t in texts}
    rationales = rationales_of(texts, rows, flags.get, tok)
    attributions = [
        {"oracle": np.array([0.0, *r.flags]), "random": rng.random(len(row))}
        for r, row in zip(rationales, rows, strict=True)
    ]
    report = Faithfulness(split="test", texts=3, removal="mask", k=[50.0], ig_error=0.0)
    report.scores, report.sem = {"oracle": {}, "random": {}}, {"oracle": {}, "random": {}}
    net = tiny_net(tok.get_vocab_size(), max_len=1024)
    with caplog.at_level(logging.INFO, logger="transformer_attention.data.progress"):
        assert add_plausibility(report, attributions, rationales, Rerun(net, rows, [0, 0, 0], None, progress=True)) == 3
    assert "plausibility (ERASER per word): 3 texts" in caplog.text  # where it is: at the start and the end
    share = np.mean([r.flags.mean() for r in rationales])
    assert report.scores["oracle"]["auprc"] == report.scores["oracle"]["token_f1"] == 1.0
    assert abs(report.scores["random"]["auprc"] - share) < 0.1  # the floor: about the share of marked words


@pytest.mark.skipif(not MOVIES.is_dir(), reason=f"the movie reviews with rationales are not in {MOVIES}")
def test_the_first_movie_reviews_rationales_line_up_with_their_words():
    rows = pd.read_parquet(MOVIES / "test.parquet").head(5)
    tok = train_tokenizer(list(rows["text"]), vocab_size=300, min_frequency=1)  # small: many words in pieces
    for i, (text, flags) in enumerate(zip(rows["text"], rows["rationale"], strict=True)):
        words = rationale_flags(flags, text, f"test row {i}")
        ids = tok.encode(text).ids
        found = word_rationale(text, words, tok, len(ids))
        assert found.flags.tolist() == [bool(f) for f in flags] and len(found.words) == len(text.split()) + 1
        assert max(len(w.tokens) for w in found.words) > 1  # some words in pieces, each scored once
        scores = np.zeros(len(ids))  # the people's own marks as a method's scores, on every piece of a word
        for value, word in zip(found.flags, found.words[1:], strict=True):
            scores[word.tokens] = float(value)
        assert text_scores(word_scores(scores, found), found.flags) == {
            "auprc": 1.0,
            "average_precision": 1.0,
            "token_f1": 1.0,
        }
