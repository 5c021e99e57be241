"""Word pieces joined into words, per-word sums and the pooled row, against hand-made texts and NumPy."""

import numpy as np
import pytest

from transformer_attention.plotting import join_pieces, pooled_rollout, pooled_row, word_values


def test_pieces_join_into_words_and_specials_stand_alone():
    words = join_pieces(["[CLS]", "the", "un", "##watch", "##able", "film", "##", "!"])
    assert [w.text for w in words] == ["[CLS]", "the", "unwatchable", "film", "##", "!"]
    assert [w.tokens for w in words] == [[0], [1], [2, 3, 4], [5], [6], [7]]


def test_a_leading_piece_stands_alone_without_its_mark():
    words = join_pieces(["##ing", "well"])
    assert [(w.text, w.tokens) for w in words] == [("ing", [0]), ("well", [1])]


def test_word_values_sum_the_pieces_and_keep_the_total():
    words = join_pieces(["[CLS]", "un", "##watch", "##able", "plot"])
    row = np.array([0.1, 0.2, 0.3, 0.15, 0.25])
    got = word_values(row, words)
    np.testing.assert_allclose(got, [0.1, 0.65, 0.25])
    assert got.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="4 values for words that cover 5 tokens"):
        word_values(row[:4], words)


def test_pooled_row_is_the_cls_row_or_the_mean_of_rows_of_the_head_mean():
    rng = np.random.default_rng(0)
    w = rng.random((3, 5, 5))
    w /= w.sum(-1, keepdims=True)
    np.testing.assert_allclose(pooled_row(w, "cls"), w.mean(0)[0])
    np.testing.assert_allclose(pooled_row(w, "mean"), w.mean(0).mean(0))
    np.testing.assert_allclose(pooled_rollout(w[0], "mean"), w[0].mean(0), rtol=1e-6)
    with pytest.raises(ValueError, match="pooling='max'"):
        pooled_row(w, "max")


def test_scales_map_rows_to_colours():
    from transformer_attention.plotting.scales import SCALES, check_scale, scaled

    w = np.array([[0.5, 0.25, 0.25, 0.0], [0.25, 0.25, 0.25, 0.25]])
    np.testing.assert_allclose(scaled(w, "fixed"), w)
    np.testing.assert_allclose(scaled(w, "row"), [[1, 0.5, 0.5, 0], [1, 1, 1, 1]])
    np.testing.assert_allclose(scaled(w, "uniform")[1], [0.5] * 4)  # an even spread is half colour
    np.testing.assert_allclose(scaled(w, "uniform")[0], [2 / 3, 0.5, 0.5, 0])
    np.testing.assert_allclose(scaled(np.zeros((2, 3)), "row"), 0)  # an all-masked row stays blank
    assert set(SCALES) == {"fixed", "row", "uniform"}
    with pytest.raises(ValueError, match="scale='log': expected one of fixed, row, uniform"):
        check_scale("log")
