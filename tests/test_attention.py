"""Attention against oracles: a NumPy reference, torch.nn.MultiheadAttention, gradcheck, mask rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from transformer_attention.model import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)


# ---- a NumPy reference: the NumPy tutorial's algorithm, written correctly --------------------
def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_attention(q, k, v, mask=None):
    """q (..., Tq, Dk), k/v (..., Tk, Dk), mask broadcastable to (..., Tq, Tk), True = attend."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e300)
    w = np_softmax(scores)
    if mask is not None:
        w = np.where(mask, w, 0.0)
    return w @ v, w


def np_multi_head(x_q, x_kv, wq, bq, wk, bk, wv, bv, wo, bo, num_heads, mask=None):
    """x (B, T, D); weights as torch Linear stores them (out, in)."""
    B, Tq, D = x_q.shape
    Tk = x_kv.shape[1]
    dk = D // num_heads

    def split(x, T):
        return x.reshape(B, T, num_heads, dk).transpose(0, 2, 1, 3)  # (B, H, T, Dk)

    q, k, v = split(x_q @ wq.T + bq, Tq), split(x_kv @ wk.T + bk, Tk), split(x_kv @ wv.T + bv, Tk)
    out, w = np_attention(q, k, v, None if mask is None else mask[:, None, None, :])
    out = out.transpose(0, 2, 1, 3).reshape(B, Tq, D)
    return out @ wo.T + bo, w


def lengths_mask(lengths: list[int], T: int) -> torch.Tensor:
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)


def test_sdpa_matches_numpy_float64():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    mask = lengths_mask([5, 2], 5)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_w = np_attention(q.numpy(), k.numpy(), v.numpy(), mask.numpy()[:, None, None, :])
    np.testing.assert_allclose(out.numpy(), ref_out, atol=1e-12)
    np.testing.assert_allclose(w.numpy(), ref_w, atol=1e-12)


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_matches_numpy_float64(cross: bool):
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3, dropout=0.0).double().eval()
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    kv = torch.randn(2, 4, 12, dtype=torch.float64) if cross else x
    mask = lengths_mask([kv.shape[1], 2], kv.shape[1])
    out, w = mha(x, kv, kv, mask=mask)
    p = {n: t.detach().numpy() for n, t in mha.named_parameters()}
    ref_out, ref_w = np_multi_head(
        x.numpy(), kv.numpy(), p["w_q.weight"], p["w_q.bias"], p["w_k.weight"], p["w_k.bias"],
        p["w_v.weight"], p["w_v.bias"], p["w_o.weight"], p["w_o.bias"], 3, mask.numpy(),
    )
    np.testing.assert_allclose(out.detach().numpy(), ref_out, atol=1e-10)
    np.testing.assert_allclose(w.detach().numpy(), ref_w, atol=1e-10)


def copy_into_torch_mha(mine: MultiHeadAttention, dtype: torch.dtype) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(mine.d_model, mine.num_heads, dropout=0.0, batch_first=True, dtype=dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mine.w_q.weight, mine.w_k.weight, mine.w_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mine.w_q.bias, mine.w_k.bias, mine.w_v.bias]))
        ref.out_proj.weight.copy_(mine.w_o.weight)
        ref.out_proj.bias.copy_(mine.w_o.bias)
    return ref.eval()


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_matches_torch(dtype: torch.dtype, tol: float, masked: bool):
    torch.manual_seed(1)
    mine = MultiHeadAttention(32, 4, dropout=0.0).to(dtype).eval()
    ref = copy_into_torch_mha(mine, dtype)
    x = torch.randn(3, 7, 32, dtype=dtype)
    mask = lengths_mask([7, 4, 1], 7) if masked else None
    out, w = mine(x, x, x, mask=mask)
    ref_out, ref_w = ref(x, x, x, key_padding_mask=None if mask is None else ~mask, average_attn_weights=False)
    assert (out - ref_out).abs().max() <= tol
    assert (w - ref_w).abs().max() <= tol


def test_cross_attention_matches_torch():
    torch.manual_seed(2)
    mine = MultiHeadAttention(16, 2, dropout=0.0).eval()
    ref = copy_into_torch_mha(mine, torch.float32)
    q, kv = torch.randn(2, 3, 16), torch.randn(2, 9, 16)
    mask = lengths_mask([9, 5], 9)
    out, w = mine(q, kv, kv, mask=mask)
    ref_out, ref_w = ref(q, kv, kv, key_padding_mask=~mask, average_attn_weights=False)
    assert w.shape == (2, 2, 3, 9)
    assert (out - ref_out).abs().max() <= 1e-5 and (w - ref_w).abs().max() <= 1e-5


def test_gradcheck_float64():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 4, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = lengths_mask([3], 4)
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, mask), (q, k, v))
    mha = MultiHeadAttention(6, 2, dropout=0.0).double()
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: mha(t, t, t, mask=lengths_mask([4, 2], 4))[0], (x,))


def test_mask_rules():
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 2, dropout=0.0).eval()
    x = torch.randn(3, 5, 8)
    mask = lengths_mask([5, 3, 0], 5)  # the last row is all padding
    out, w = mha(x, x, x, mask=mask)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.all(w[1, :, :, 3:] == 0)  # masked keys get exactly zero weight
    torch.testing.assert_close(w[:2].sum(-1), torch.ones(2, 2, 5))  # rows with keys sum to 1
    assert torch.all(w[2] == 0)  # a row with no key: zero weights ...
    _, attn_only = scaled_dot_product_attention(*(torch.randn(3, 2, 5, 4) for _ in range(3)), mask)
    out0, _ = scaled_dot_product_attention(*(torch.randn(3, 2, 5, 4) for _ in range(3)), mask)
    assert torch.all(out0[2] == 0)  # ... and a zero output
    assert torch.equal(attn_only[2], torch.zeros(2, 5, 5))


def test_causal_and_shared_masks():
    torch.manual_seed(5)
    mha = MultiHeadAttention(8, 2, dropout=0.0).eval()
    x = torch.randn(2, 4, 8)
    cm = causal_mask(4)
    assert torch.equal(cm, torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))
    _, w = mha(x, x, x, mask=cm)
    assert torch.all(w.triu(diagonal=1) == 0)
    # causal output at position t does not depend on later tokens
    x2 = x.clone()
    x2[:, 3] += 10.0
    out1, _ = mha(x, x, x, mask=cm)
    out2, _ = mha(x2, x2, x2, mask=cm)
    torch.testing.assert_close(out1[:, :3], out2[:, :3])
    # (B, Tq, Tk) per-pair mask equals the shared one expanded
    out3, _ = mha(x, x, x, mask=cm.expand(2, 4, 4))
    torch.testing.assert_close(out1, out3)


def test_bad_mask_shape_names_shapes():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        mha(x, x, x, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool"):
        mha(x, x, x, mask=torch.ones(2, 4))


def test_d_model_not_divisible():
    with pytest.raises(ValueError, match="d_model=10.*num_heads=3"):
        MultiHeadAttention(10, 3)


def test_padding_mask():
    ids = torch.tensor([[2, 5, 7, 0, 0], [2, 9, 0, 0, 0]])
    assert torch.equal(padding_mask(ids, 0), ids != 0)


def test_weights_are_before_dropout():
    torch.manual_seed(6)
    mha = MultiHeadAttention(8, 2, dropout=0.5).train()
    x = torch.randn(2, 5, 8)
    _, w = mha(x, x, x)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 5))  # dropout would break this


def test_self_attention_is_permutation_equivariant():
    torch.manual_seed(7)
    mha = MultiHeadAttention(8, 2, dropout=0.0).eval()
    x = torch.randn(2, 6, 8)
    mask = lengths_mask([6, 6], 6)
    perm = torch.randperm(6)
    out, w = mha(x, x, x, mask=mask)
    out_p, w_p = mha(x[:, perm], x[:, perm], x[:, perm], mask=mask[:, perm])
    torch.testing.assert_close(out_p, out[:, perm])
    torch.testing.assert_close(w_p, w[:, :, perm][:, :, :, perm])
