"""Attention against oracles: a NumPy reference, torch.nn.MultiheadAttention, gradcheck, mask rules.

Every attention path (math, sdpa) is held to the same oracles; the weights, which only the
math path returns, are checked on it."""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

from transformer_attention.model import (
    ATTENTION_IMPLS,
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    sdpa_attention,
)

# each path as one call: q, k, v (B, H, T, Dk), mask -> out (B, H, Tq, Dk)
ATTEND = {
    "math": lambda q, k, v, mask: scaled_dot_product_attention(q, k, v, mask)[0],
    "sdpa": sdpa_attention,
}


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


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("cross", [False, True])
def test_every_path_matches_numpy_float64(impl: str, cross: bool):
    g = torch.Generator().manual_seed(0)
    Tk = 7 if cross else 5
    q = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 3, Tk, 4, generator=g, dtype=torch.float64) for _ in range(2))
    mask = lengths_mask([Tk, 2], Tk)
    out = ATTEND[impl](q, k, v, mask)
    ref_out, _ = np_attention(q.numpy(), k.numpy(), v.numpy(), mask.numpy()[:, None, None, :])
    np.testing.assert_allclose(out.numpy(), ref_out, atol=1e-12)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_matches_numpy_float64(impl: str, cross: bool):
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3, dropout=0.0, attention_impl=impl).double().eval()
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    kv = torch.randn(2, 4, 12, dtype=torch.float64) if cross else x
    mask = lengths_mask([kv.shape[1], 2], kv.shape[1])
    out, w = mha(x, kv, kv, mask=mask)  # the weights: always the math path
    fast, none = mha(x, kv, kv, mask=mask, need_weights=False)  # the chosen path
    p = {n: t.detach().numpy() for n, t in mha.named_parameters()}
    ref_out, ref_w = np_multi_head(
        x.numpy(),
        kv.numpy(),
        p["w_q.weight"],
        p["w_q.bias"],
        p["w_k.weight"],
        p["w_k.bias"],
        p["w_v.weight"],
        p["w_v.bias"],
        p["w_o.weight"],
        p["w_o.bias"],
        3,
        mask.numpy(),
    )
    assert none is None
    np.testing.assert_allclose(out.detach().numpy(), ref_out, atol=1e-10)
    np.testing.assert_allclose(fast.detach().numpy(), ref_out, atol=1e-10)
    np.testing.assert_allclose(w.detach().numpy(), ref_w, atol=1e-10)


def copy_into_torch_mha(mine: MultiHeadAttention, dtype: torch.dtype) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(mine.d_model, mine.num_heads, dropout=0.0, batch_first=True, dtype=dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mine.w_q.weight, mine.w_k.weight, mine.w_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mine.w_q.bias, mine.w_k.bias, mine.w_v.bias]))
        ref.out_proj.weight.copy_(mine.w_o.weight)
        ref.out_proj.bias.copy_(mine.w_o.bias)
    return ref.eval()


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_matches_torch(impl: str, dtype: torch.dtype, tol: float, masked: bool):
    torch.manual_seed(1)
    mine = MultiHeadAttention(32, 4, dropout=0.0, attention_impl=impl).to(dtype).eval()
    ref = copy_into_torch_mha(mine, dtype)
    x = torch.randn(3, 7, 32, dtype=dtype)
    mask = lengths_mask([7, 4, 1], 7) if masked else None
    out, w = mine(x, x, x, mask=mask)
    fast, _ = mine(x, mask=mask, need_weights=False)
    ref_out, ref_w = ref(x, x, x, key_padding_mask=None if mask is None else ~mask, average_attn_weights=False)
    assert (out - ref_out).abs().max() <= tol
    assert (fast - ref_out).abs().max() <= tol
    assert (w - ref_w).abs().max() <= tol


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_cross_attention_matches_torch(impl: str):
    torch.manual_seed(2)
    mine = MultiHeadAttention(16, 2, dropout=0.0, attention_impl=impl).eval()
    ref = copy_into_torch_mha(mine, torch.float32)
    q, kv = torch.randn(2, 3, 16), torch.randn(2, 9, 16)
    mask = lengths_mask([9, 5], 9)
    out, w = mine(q, kv, kv, mask=mask)
    fast, _ = mine(q, kv, mask=mask, need_weights=False)  # value None: value = key
    ref_out, ref_w = ref(q, kv, kv, key_padding_mask=~mask, average_attn_weights=False)
    assert w.shape == (2, 2, 3, 9)
    assert (out - ref_out).abs().max() <= 1e-5 and (w - ref_w).abs().max() <= 1e-5
    assert (fast - ref_out).abs().max() <= 1e-5


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_gradcheck_float64(impl: str):
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 4, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = lengths_mask([3], 4)
    assert torch.autograd.gradcheck(lambda a, b, c: ATTEND[impl](a, b, c, mask), (q, k, v))
    mha = MultiHeadAttention(6, 2, dropout=0.0, attention_impl=impl).double()
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    mask = lengths_mask([4, 2], 4)
    assert torch.autograd.gradcheck(lambda t: mha(t, mask=mask, need_weights=False)[0], (x,))
    assert torch.autograd.gradcheck(lambda t: mha(t, t, t, mask=mask)[0], (x,))  # the math path, with weights


def test_self_attention_call_forms_agree():
    """mha(x), mha(x, x) and mha(x, x, x) are one call: key None is self-attention, value None is value = key."""
    torch.manual_seed(12)
    mha = MultiHeadAttention(12, 3, dropout=0.0).double().eval()
    x, kv = torch.randn(2, 5, 12, dtype=torch.float64), torch.randn(2, 7, 12, dtype=torch.float64)
    mask = lengths_mask([5, 3], 5)
    out, w = mha(x, x, x, mask=mask)
    for other in (mha(x, mask=mask), mha(x, x, mask=mask)):
        torch.testing.assert_close(other[0], out, atol=1e-12, rtol=0)
        torch.testing.assert_close(other[1], w, atol=1e-12, rtol=0)
    torch.testing.assert_close(mha(x, kv)[0], mha(x, kv, kv)[0], atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="value given without key"):
        mha(x, value=kv)


def test_the_math_path_reads_like_the_tutorial():
    """scaled_dot_product_attention's body (docstring aside) is at most 15 lines."""
    source = textwrap.dedent(inspect.getsource(scaled_dot_product_attention))
    body = ast.parse(source).body[0].body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    assert body[-1].end_lineno - body[0].lineno + 1 <= 15


def test_the_module_reads_like_the_tutorial():
    """MultiHeadAttention.forward takes at most 5 arguments; one default kernel, shared by the settings, the layer
    and the module."""
    from transformer_attention.model import EncoderConfig, TransformerEncoderLayer

    params = [p for p in inspect.signature(MultiHeadAttention.forward).parameters if p != "self"]
    assert params == ["query", "key", "value", "mask", "need_weights"]
    default = inspect.signature(MultiHeadAttention).parameters["attention_impl"].default
    assert default == EncoderConfig().attention_impl
    assert inspect.signature(TransformerEncoderLayer).parameters["attention_impl"].default == default


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_mask_rules(impl: str):
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 2, dropout=0.0, attention_impl=impl).eval()
    x = torch.randn(3, 5, 8)
    mask = lengths_mask([5, 3, 0], 5)  # the last row is all padding
    out, w = mha(x, x, x, mask=mask)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.all(w[1, :, :, 3:] == 0)  # masked keys get exactly zero weight
    torch.testing.assert_close(w[:2].sum(-1), torch.ones(2, 2, 5))  # rows with keys sum to 1
    assert torch.all(w[2] == 0)  # a row with no key: zero weights ...
    fast, _ = mha(x, mask=mask, need_weights=False)
    torch.testing.assert_close(fast, out)
    q, k, v = (torch.randn(3, 2, 5, 4) for _ in range(3))
    _, attn_only = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(ATTEND[impl](q, k, v, mask)[2] == 0)  # ... and a zero output
    assert torch.equal(attn_only[2], torch.zeros(2, 5, 5))


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_causal_and_shared_masks(impl: str):
    torch.manual_seed(5)
    mha = MultiHeadAttention(8, 2, dropout=0.0, attention_impl=impl).eval()
    x = torch.randn(2, 4, 8)
    cm = causal_mask(4)
    assert torch.equal(cm, torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))
    _, w = mha(x, x, x, mask=cm)
    assert torch.all(w.triu(diagonal=1) == 0)
    # causal output at position t does not depend on later tokens
    x2 = x.clone()
    x2[:, 3] += 10.0
    out1, _ = mha(x, mask=cm, need_weights=False)
    out2, _ = mha(x2, mask=cm, need_weights=False)
    torch.testing.assert_close(out1[:, :3], out2[:, :3])
    # (B, Tq, Tk) per-pair mask equals the shared one expanded
    out3, _ = mha(x, mask=cm.expand(2, 4, 4), need_weights=False)
    torch.testing.assert_close(out1, out3)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_bad_mask_shape_names_shapes(impl: str):
    mha = MultiHeadAttention(8, 2, attention_impl=impl)
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        mha(x, mask=torch.ones(3, 4, dtype=torch.bool), need_weights=False)
    with pytest.raises(ValueError, match="bool"):
        mha(x, mask=torch.ones(2, 4), need_weights=False)
    q = torch.randn(2, 2, 4, 4)
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        ATTEND[impl](q, q, q, torch.ones(3, 4, dtype=torch.bool))


def test_bad_settings_are_clear_errors():
    with pytest.raises(ValueError, match="d_model=10.*num_heads=3"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="attention_impl='flash'.*math, sdpa"):
        MultiHeadAttention(8, 2, attention_impl="flash")


def test_padding_mask():
    ids = torch.tensor([[2, 5, 7, 0, 0], [2, 9, 0, 0, 0]])
    assert torch.equal(padding_mask(ids, 0), ids != 0)


def test_weights_are_before_dropout():
    torch.manual_seed(6)
    mha = MultiHeadAttention(8, 2, dropout=0.5).train()
    x = torch.randn(2, 5, 8)
    _, w = mha(x, x, x)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 5))  # dropout would break this


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_self_attention_is_permutation_equivariant(impl: str):
    torch.manual_seed(7)
    mha = MultiHeadAttention(8, 2, dropout=0.0, attention_impl=impl).eval()
    x = torch.randn(2, 6, 8)
    mask = lengths_mask([6, 6], 6)
    perm = torch.randperm(6)
    out, w = mha(x, x, x, mask=mask)
    out_p, w_p = mha(x[:, perm], x[:, perm], x[:, perm], mask=mask[:, perm])
    fast_p, _ = mha(x[:, perm], mask=mask[:, perm], need_weights=False)
    torch.testing.assert_close(out_p, out[:, perm])
    torch.testing.assert_close(fast_p, out[:, perm])
    torch.testing.assert_close(w_p, w[:, :, perm][:, :, :, perm])


# ---- norm-weighted attention (Kobayashi et al. 2020) --------------------------------------------
def np_weighted_norms(x_kv, wv, bv, wo, weights, num_heads):
    """||alpha_ij f_h(x_j)||, f_h(x) = (x W_V + b_V) W_O over head h's slice, a loop per head and key."""
    B, Tk, D = x_kv.shape
    dk = D // num_heads
    out = np.zeros(weights.shape)
    for h in range(num_heads):
        cols = slice(h * dk, (h + 1) * dk)
        v = x_kv @ wv[cols].T + bv[cols]  # (B, Tk, Dk): head h's values
        moved = v @ wo[:, cols].T  # (B, Tk, D): what each key moves into the output
        for j in range(Tk):
            out[:, h, :, j] = np.linalg.norm(weights[:, h, :, j, None] * moved[:, None, j], axis=-1)
    return out


@pytest.mark.parametrize("cross", [False, True])
def test_weighted_norms_match_numpy(cross: bool):
    """A hand-built layer's norm-weighted map against NumPy."""
    from transformer_attention.model.probes import weighted_norms

    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3, dropout=0.0).double().eval()
    with torch.no_grad():  # hand-built: a value projection and output slices of very different sizes
        mha.w_v.weight.copy_(torch.diag(torch.arange(1.0, 13.0, dtype=torch.float64)))
        mha.w_o.weight.mul_(torch.tensor([0.1] * 4 + [1.0] * 4 + [5.0] * 4, dtype=torch.float64))
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    kv = torch.randn(2, 4, 12, dtype=torch.float64) if cross else x
    mask = lengths_mask([kv.shape[1], 2], kv.shape[1])
    with torch.no_grad():
        _, w = mha(x, kv, kv, mask=mask)
        norms = weighted_norms(w, mha.w_v(kv), mha)
    p = {n: t.detach().numpy() for n, t in mha.named_parameters()}
    ref = np_weighted_norms(kv.numpy(), p["w_v.weight"], p["w_v.bias"], p["w_o.weight"], w.numpy(), 3)
    np.testing.assert_allclose(norms.numpy(), ref, rtol=1e-10, atol=1e-12)
    assert (norms[1, ..., 2:] == 0).all()  # a masked key moves nothing
    # the heads differ in what they move, so the norm ranks keys apart from the weight
    assert not np.allclose(ref / ref.sum(-1, keepdims=True), w.numpy(), atol=1e-3)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_norm_weighted_forward_reads_the_values_the_layers_computed(impl: str):
    """`norm_weighted_forward` gives one (B, H, T, T) map per layer, each the layer's weights times ||f(x_j)|| of
    the values that layer computed (the NumPy oracle on the inputs recorded at each layer), and the same logits."""
    from transformer_attention.model import TransformerClassifier, norm_weighted_forward

    torch.manual_seed(0)
    net = TransformerClassifier(
        vocab_size=50, num_classes=3, d_model=16, num_heads=2, num_layers=2, dropout=0.0, attention_impl=impl
    ).double()
    net.eval()
    ids = torch.randint(3, 50, (3, 7))
    ids[1, 5:] = 0
    inputs = []  # each layer's input to its attention: what its values are made from
    with torch.no_grad():
        plain = net(ids).logits
        _, weights = net(ids, need_weights=True)
        handles = [
            layer.self_attn.register_forward_hook(lambda m, a, o: inputs.append(a[0])) for layer in net.encoder.layers
        ]
        logits_n, norms = norm_weighted_forward(net, ids)
    for h in handles:
        h.remove()
    torch.testing.assert_close(logits_n, plain, rtol=0, atol=1e-12)
    assert len(norms) == 2 and norms[0].shape == (3, 2, 7, 7)
    for layer, w, n, x in zip(net.encoder.layers, weights, norms, inputs, strict=True):
        p = {k: t.detach().numpy() for k, t in layer.self_attn.named_parameters()}
        ref = np_weighted_norms(x.numpy(), p["w_v.weight"], p["w_v.bias"], p["w_o.weight"], w.numpy(), 2)
        np.testing.assert_allclose(n.numpy(), ref, rtol=1e-10, atol=1e-12)
        assert (n[1, ..., 5:] == 0).all()


def test_the_probes_leave_no_hook_behind():
    """After `gated_heads` and `norm_weighted_forward`, also when the block raises, the model computes what it
    did before: the hooks are gone (a zero gate left in place would change the logits)."""
    from transformer_attention.model import TransformerClassifier, gated_heads, norm_weighted_forward

    torch.manual_seed(0)
    net = TransformerClassifier(vocab_size=50, num_classes=3, d_model=16, num_heads=2, num_layers=2).eval()
    ids = torch.randint(3, 50, (2, 6))
    with torch.no_grad():
        plain = net(ids).logits
        with gated_heads(net, torch.zeros(2, 2)):
            assert not torch.equal(net(ids).logits, plain)
        with pytest.raises(RuntimeError, match="inside"), gated_heads(net, torch.zeros(2, 2)):
            raise RuntimeError("inside")
        norm_weighted_forward(net, ids)
        assert torch.equal(net(ids).logits, plain)
