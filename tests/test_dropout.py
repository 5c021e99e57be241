"""The model's Dropout behaves as nn.Dropout: same expectation, same zero fraction, same gradient rule."""

from __future__ import annotations

import pytest
import torch

from transformer_attention.model import Dropout
from transformer_attention.model.dropout import dropout_threshold, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_training_drops_p_and_keeps_the_mean(p: float):
    torch.manual_seed(0)
    drop = Dropout(p).train()
    x = torch.ones(1_000_001)  # odd: the last draw is split unevenly
    y = drop(x)
    assert abs((y == 0).float().mean().item() - p) < 3e-3
    assert abs(y.mean().item() - 1.0) < 5e-3
    kept = y[y != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / (1 - dropout_threshold(p)[0] / 2**15)))


def test_eval_and_zero_p_are_the_identity():
    x = torch.randn(4, 5)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x


def test_gradient_is_the_same_mask_and_scale():
    torch.manual_seed(1)
    x = torch.randn(64, 33, requires_grad=True)
    y = Dropout(0.25).train()(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y.detach() / x.detach()))


def test_the_same_generator_state_gives_the_same_mask_and_masks_vary():
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    shape = torch.Size((3, 17, 9))
    a, b = keep_mask(shape, 3277, g1), keep_mask(shape, 3277, g2)
    assert torch.equal(a, b) and a.shape == shape
    assert not torch.equal(a, keep_mask(shape, 3277, g1))
    # the two 15-bit halves of each draw are not the same decision
    flat = keep_mask(torch.Size((200_000,)), 2**14, torch.Generator().manual_seed(3))
    agree = (flat[:100_000] == flat[100_000:]).float().mean().item()
    assert abs(agree - 0.5) < 0.01


@pytest.mark.parametrize("p", [-0.1, 1.0])
def test_bad_probability_is_a_clear_error(p: float):
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        Dropout(p)
