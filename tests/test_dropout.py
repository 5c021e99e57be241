"""Dropout is torch's nn.Dropout everywhere (the class's default), with the configured p; attention dropout
on every path (math, chunked, sdpa) is unbiased and drops something; eval mode is the identity; the chunked
path's masks come from torch.manual_seed and are replayed in backward; FastDropout (training runs) draws
the same dropout on a CPU and is torch's own elsewhere."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_attention.model import (
    ATTENTION_IMPLS,
    MultiHeadAttention,
    TransformerClassifier,
    chunked_attention,
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
    if impl == "chunked":
        return chunked_attention(q, k, v, dropout_p=p, block_q=8, block_k=8)
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


def test_chunked_dropout_follows_the_global_seed_and_varies():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 2, 12, 4, generator=g) for _ in range(3))

    def once(seed: int | None) -> torch.Tensor:
        if seed is not None:
            torch.manual_seed(seed)
        return chunked_attention(q, k, v, dropout_p=0.3, block_q=4, block_k=4)

    assert torch.equal(once(7), once(7))
    assert not torch.equal(once(7), once(None))


def test_chunked_dropout_drops_the_fraction_p():
    """All scores equal (q = 0): each output is (kept keys / Tk) / (1 - p)."""
    p, Tk = 0.3, 4096
    q, k, v = torch.zeros(1, 1, 8, 4), torch.randn(1, 1, Tk, 4), torch.ones(1, 1, Tk, 4)
    torch.manual_seed(3)
    out = chunked_attention(q, k, v, dropout_p=p, block_q=4, block_k=512)
    kept = out[..., 0] * (1 - p)  # (1, 1, 8): the kept fraction of each query row
    assert torch.allclose(kept, torch.full_like(kept, 1 - p), atol=0.03)
    assert kept.unique().numel() > 1  # each row its own mask


def test_chunked_gradient_replays_the_forward_mask():
    """With dropout, backward sees the forward's masks: its gradient equals autograd's through the
    math of the same masks, recovered from the output with v = identity columns."""
    g = torch.Generator().manual_seed(6)
    q, k = (torch.randn(1, 1, 6, 6, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    v = torch.eye(6, dtype=torch.float64)[None, None].requires_grad_()  # out = dropped weights
    torch.manual_seed(11)
    dropped = chunked_attention(q, k, v, dropout_p=0.5, block_q=2, block_k=3)  # (1, 1, 6, 6)
    grad = torch.randn(1, 1, 6, 6, generator=g, dtype=torch.float64)
    dq, dk = torch.autograd.grad(dropped, (q, k), grad)
    keep = dropped.detach() != 0  # the masks the forward drew
    weights = scaled_dot_product_attention(q, k, v)[1]
    ref = weights * keep / 0.5
    ref_dq, ref_dk = torch.autograd.grad(ref, (q, k), grad)
    torch.testing.assert_close(dropped, ref.detach(), atol=1e-12, rtol=0)
    torch.testing.assert_close(dq, ref_dq, atol=1e-12, rtol=0)
    torch.testing.assert_close(dk, ref_dk, atol=1e-12, rtol=0)


@pytest.mark.parametrize("p", [-0.1, 1.0])
def test_bad_probability_is_a_clear_error(p: float):
    q = torch.randn(1, 1, 3, 2)
    for fn in (chunked_attention, sdpa_attention):
        with pytest.raises(ValueError, match=r"dropout_p=.*\[0, 1\)"):
            fn(q, q, q, dropout_p=p)
    with pytest.raises(ValueError):
        make_model(dropout=p)


# ---- the opt-in FastDropout (model.fast_dropout=true): nn.Dropout's behaviour at half the random numbers
def test_fast_dropout_replaces_every_dropout_with_the_same_p_and_keeps_the_eval_logits():
    from transformer_attention.model.dropout import FastDropout

    plain, fast = (
        make_model(dropout=0.3, attention_dropout=0.2),
        make_model(dropout=0.3, attention_dropout=0.2, fast_dropout=True),
    )
    ps = {n: m.p for n, m in plain.named_modules() if isinstance(m, nn.Dropout)}
    assert ps and {n: m.p for n, m in fast.named_modules() if isinstance(m, FastDropout)} == ps
    assert not any(type(m) is nn.Dropout for m in fast.modules())  # each one a FastDropout (an nn.Dropout subclass)
    torch.testing.assert_close(fast.eval()(tokens()).logits, plain.eval()(tokens()).logits, rtol=0, atol=0)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_fast_dropout_drops_p_and_keeps_the_mean(p: float):
    from transformer_attention.model.dropout import FastDropout, dropout_threshold

    torch.manual_seed(0)
    y = FastDropout(p).train()(torch.ones(1_000_001))  # odd: the last draw is split unevenly
    assert abs((y == 0).float().mean().item() - p) < 3e-3
    assert abs(y.mean().item() - 1.0) < 5e-3
    kept = y[y != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / (1 - dropout_threshold(p)[0] / 2**15)))


def test_fast_dropout_eval_zero_p_and_gradient():
    from transformer_attention.model.dropout import FastDropout

    x = torch.randn(4, 5)
    assert FastDropout(0.3).eval()(x) is x and FastDropout(0.0).train()(x) is x
    torch.manual_seed(1)
    x = torch.randn(64, 33, requires_grad=True)
    y = FastDropout(0.25).train()(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach() / x.detach())  # the same mask and scale


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fast_dropout_is_mask_then_scale_bit_for_bit(dtype):
    """The scale folded into a float mask (fp32, fp64) gives what multiplying by the mask and then by the scale
    gives, outputs and gradients, to the last bit; bf16 keeps that order (a bf16 scale would be rounded)."""
    from transformer_attention.model.dropout import FastDropout, dropout_threshold, keep_mask

    x = (torch.randn(64, 12, 64) * 3).to(dtype).requires_grad_()
    grad = torch.randn(x.shape).to(dtype)
    torch.manual_seed(5)
    y = FastDropout(0.1).train()(x)
    y.backward(grad)
    torch.manual_seed(5)
    threshold, scale = dropout_threshold(0.1)
    reference = x.detach().clone().requires_grad_()
    expected = (reference * keep_mask(x.shape, threshold)).mul_(scale)
    expected.backward(grad)
    assert y.dtype == dtype and torch.equal(y, expected) and torch.equal(x.grad, reference.grad)
    assert 0.05 < (y == 0).float().mean().item() < 0.15


def test_keep_masks_replay_from_a_generator_and_their_halves_are_independent():
    from transformer_attention.model.dropout import keep_mask

    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    shape = torch.Size((3, 17, 9))
    a, b = keep_mask(shape, 3277, g1), keep_mask(shape, 3277, g2)
    assert torch.equal(a, b) and a.shape == shape
    assert not torch.equal(a, keep_mask(shape, 3277, g1))
    flat = keep_mask(torch.Size((200_000,)), 2**14, torch.Generator().manual_seed(3))
    assert abs((flat[:100_000] == flat[100_000:]).float().mean().item() - 0.5) < 0.01


def test_fast_dropout_off_the_cpu_is_torchs_own(monkeypatch):
    from transformer_attention.model import dropout

    def no_mask(*args, **kwargs):
        raise AssertionError("keep_mask drawn off the CPU")

    monkeypatch.setattr(dropout, "keep_mask", no_mask)
    y = dropout.FastDropout(0.3).train()(torch.ones(8, 5, device="meta"))  # a device that is not the CPU
    assert y.device.type == "meta" and y.shape == (8, 5)
    with pytest.raises(AssertionError, match="off the CPU"):
        dropout.FastDropout(0.3).train()(torch.ones(8, 5))


@pytest.mark.parametrize("experiment", [None, "rotten_tomatoes", "imdb"])
def test_training_runs_use_torchs_dropout_unless_asked(experiment):
    """FastDropout is opt-in: the default run and both recipes train with the nn.Dropout the model's code shows."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={experiment}"] if experiment else [])
    assert cfg.model.fast_dropout is False
    assert make_model().config.fast_dropout is False  # the class alone: torch's nn.Dropout
