"""Attention rollout against hand-computed cases."""

import numpy as np
import pytest
import torch

from transformer_attention.plotting import attention_rollout, pooled_rollout


def test_two_layers_by_hand():
    a1 = np.array([[1.0, 0.0], [0.5, 0.5]])  # layer 1, one head
    a2 = np.array([[0.0, 1.0], [0.0, 1.0]])  # layer 2
    # 0.5 I + 0.5 A, rows already sum to 1: [[1, 0], [.25, .75]] and [[.5, .5], [0, 1]]
    r1 = np.array([[1.0, 0.0], [0.25, 0.75]])
    r2 = np.array([[0.5, 0.5], [0.0, 1.0]])
    expected = r2 @ r1  # [[.625, .375], [.25, .75]]
    got = attention_rollout([a1[None], a2[None]])
    np.testing.assert_allclose(got, [[0.625, 0.375], [0.25, 0.75]], atol=1e-6)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_allclose(pooled_rollout(got, "cls"), [0.625, 0.375], atol=1e-6)
    np.testing.assert_allclose(pooled_rollout(got, "mean"), [0.4375, 0.5625], atol=1e-6)


def test_heads_are_averaged_first():
    heads = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])  # mean: all 0.5
    np.testing.assert_allclose(attention_rollout([heads]), [[0.75, 0.25], [0.25, 0.75]], atol=1e-6)


def test_identity_attention_gives_identity():
    T = 5
    eye = torch.eye(T).expand(3, T, T)  # 3 heads, each token reads only itself
    np.testing.assert_allclose(attention_rollout([eye]), np.eye(T), atol=1e-6)
    np.testing.assert_allclose(attention_rollout([eye, eye, eye]), np.eye(T), atol=1e-6)


def test_uniform_one_layer():
    T = 4
    uniform = np.full((1, T, T), 1.0 / T)
    expected = 0.5 * np.eye(T) + 0.5 / T
    np.testing.assert_allclose(attention_rollout([uniform]), expected, atol=1e-6)


def test_rows_sum_to_one_and_residual_weight():
    g = torch.Generator().manual_seed(0)
    layers = [torch.rand(2, 6, 6, generator=g).softmax(-1) for _ in range(3)]
    r = attention_rollout(layers)
    np.testing.assert_allclose(r.sum(-1), np.ones(6), atol=1e-5)
    np.testing.assert_allclose(attention_rollout(layers[:1], residual=0.0), layers[0].mean(0).numpy(), atol=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="at least one layer"):
        attention_rollout([])
    with pytest.raises(ValueError, match="layer 1"):
        attention_rollout([np.eye(3), np.eye(4)])
    with pytest.raises(ValueError, match=r"layer 0: attention of shape \(2, 2, 3, 3\)"):
        attention_rollout([np.ones((2, 2, 3, 3))])  # one text's maps: (H, T, T) per layer, no batch
    with pytest.raises(ValueError, match="pooling"):
        pooled_rollout(np.eye(2), "max")
