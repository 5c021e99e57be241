"""Dropout is torch's nn.Dropout everywhere, with the configured p; attention dropout on every path (math,
sdpa) is unbiased and drops something; eval mode is the identity."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_attention.model import (
    ATTENTION_IMPLS,
    MultiHeadAttention,
    TransformerClassifier,
    scaled_dot_product_attention,
    sdpa_attention,
)


def make_model(**settings) -> TransformerClassifier:
    torch.manual_seed(0)
    sizes = dict(vocab_size=50, num_classes=2, d_model=16, num_heads=2, num_layers=2, dim_feedforward=32, max_len=16)
    return TransformerClassifier(**sizes, **settings)


def tokens() -> torch.Tensor:
    ids = torch.randint(3, 50, (4, 10), generator=torch.Generator().manual_seed(1))
    ids[:, 0], ids[2:, 6:] = 2, 0  # [CLS] first, some padding
    return ids


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
@pytest.mark.parametrize("attention_dropout,attention_p", [(None, 0.3), (0.0, 0.0), (0.2, 0.2)])
def test_every_dropout_is_an_nn_dropout_with_the_configured_p(positional, attention_dropout, attention_p):
    model = make_model(dropout=0.3, attention_dropout=attention_dropout, positional=positional)
    drops = {name: m for name, m in model.named_modules() if "dropout" in type(m).__name__.lower()}
    assert all(type(m) is nn.Dropout for m in drops.values()), drops
    expected = {"pos_encoder.dropout": 0.3}
    for i in range(2):
        layer = f"encoder.layers.{i}"
        expected |= {f"{layer}.{n}": 0.3 for n in ("dropout", "dropout1", "dropout2")}
        expected[f"{layer}.self_attn.dropout"] = attention_p
    assert {name: m.p for name, m in drops.items()} == expected


def attend(impl: str, q, k, v, p: float) -> torch.Tensor:
    """One call of a path with dropout p on the weights: (B, H, Tq, Dk)."""
    if impl == "math":
        return scaled_dot_product_attention(q, k, v, dropout=nn.Dropout(p))[0]
    return sdpa_attention(q, k, v, dropout_p=p)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_attention_dropout_is_unbiased_and_drops_something(impl: str):
    g = torch.Generator().manual_seed(4)
    q, k = (torch.randn(1, 2, 16, 4, generator=g) for _ in range(2))
    v = torch.ones(1, 2, 16, 4)  # out = sum of kept weights: 1 without dropout
    torch.manual_seed(0)
    outs = torch.stack([attend(impl, q, k, v, 0.25) for _ in range(2000)])
    assert abs(outs.mean().item() - 1.0) < 0.01  # kept weights are scaled by 1 / (1 - p)
    assert outs.std().item() > 0.1  # and something was dropped


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_a_multi_head_attention_drops_in_training_only(impl: str):
    torch.manual_seed(2)
    mha = MultiHeadAttention(8, 2, dropout=0.5, attention_impl=impl)
    exact = MultiHeadAttention(8, 2, dropout=0.0, attention_impl=impl)
    exact.load_state_dict(mha.state_dict())
    x = torch.randn(2, 6, 8)
    a, b = mha.train()(x, need_weights=False)[0], mha(x, need_weights=False)[0]
    assert not torch.allclose(a, b)  # two training calls, two dropout masks
    expected, _ = exact(x, need_weights=False)
    torch.testing.assert_close(mha.eval()(x, need_weights=False)[0], expected, atol=0, rtol=0)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_eval_mode_is_the_identity(impl: str):
    noisy = make_model(dropout=0.5, attention_dropout=0.5, attention_impl=impl).eval()
    exact = make_model(dropout=0.0, attention_dropout=0.0, attention_impl=impl).eval()
    exact.load_state_dict(noisy.state_dict())
    ids = tokens()
    torch.testing.assert_close(noisy(ids).logits, exact(ids).logits, atol=0, rtol=0)
    noisy.train()
    assert not torch.allclose(noisy(ids).logits, exact(ids).logits)


@pytest.mark.parametrize("p", [-0.1, 1.0])
def test_bad_probability_is_a_clear_error(p: float):
    for key in ("dropout", "attention_dropout"):
        with pytest.raises(ValueError, match=rf"{key}={p}.*\[0, 1\)"):
            make_model(**{key: p})
