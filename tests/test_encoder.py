"""TransformerEncoderLayer against torch.nn.TransformerEncoderLayer(batch_first=True), both norm orders,
every attention path."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_attention.model import ATTENTION_IMPLS, TransformerEncoder, TransformerEncoderLayer


def copy_into_torch_layer(mine: TransformerEncoderLayer, norm_first: bool, dtype: torch.dtype):
    d, h = mine.self_attn.d_model, mine.self_attn.num_heads
    ref = nn.TransformerEncoderLayer(
        d, h, mine.linear1.out_features, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=dtype
    )
    a = mine.self_attn
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([a.w_q.weight, a.w_k.weight, a.w_v.weight]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([a.w_q.bias, a.w_k.bias, a.w_v.bias]))
        ref.self_attn.out_proj.weight.copy_(a.w_o.weight)
        ref.self_attn.out_proj.bias.copy_(a.w_o.bias)
        for name in ("linear1", "linear2", "norm1", "norm2"):
            getattr(ref, name).load_state_dict(getattr(mine, name).state_dict())
    return ref


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("masked", [False, True])
def test_layer_matches_torch(impl: str, norm_first: bool, dtype: torch.dtype, tol: float, masked: bool):
    torch.manual_seed(0)
    mine = TransformerEncoderLayer(
        d_model=32, num_heads=4, dim_feedforward=64, dropout=0.0, norm_first=norm_first, attention_impl=impl
    ).to(dtype)
    ref = copy_into_torch_layer(mine, norm_first, dtype)
    x = torch.randn(3, 9, 32, dtype=dtype)
    mask = torch.arange(9)[None] < torch.tensor([9, 5, 2])[:, None] if masked else None
    # train mode with dropout 0: torch's layer then takes its plain path, not the nested-tensor
    # fast path that writes zeros at padded positions
    mine.train(), ref.train()
    out, _ = mine(x, mask=mask)
    ref_out = ref(x, src_key_padding_mask=None if mask is None else ~mask)
    assert (out - ref_out).abs().max() <= tol
    # eval mode: equal on every real position (torch's fast path may zero the padded ones)
    mine.eval(), ref.eval()
    with torch.no_grad():
        out, w = mine(x, mask=mask, need_weights=True)  # the math path, whatever impl
        fast, _ = mine(x, mask=mask)
        ref_out = ref(x, src_key_padding_mask=None if mask is None else ~mask)
    real = torch.ones(3, 9, dtype=torch.bool) if mask is None else mask
    assert (out - ref_out)[real].abs().max() <= tol
    assert (fast - ref_out)[real].abs().max() <= tol
    assert w.shape == (3, 4, 9, 9)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_stack_matches_torch_encoder(impl: str):
    torch.manual_seed(1)
    layer = TransformerEncoderLayer(d_model=16, num_heads=2, dim_feedforward=32, dropout=0.0, attention_impl=impl)
    mine = TransformerEncoder(layer, num_layers=3).train()
    ref = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 3, enable_nested_tensor=False
    ).train()
    for m, r in zip(mine.layers, ref.layers, strict=True):
        r.load_state_dict(copy_into_torch_layer(m, False, torch.float32).state_dict())
    x = torch.randn(2, 6, 16)
    mask = torch.arange(6)[None] < torch.tensor([6, 3])[:, None]
    out, attns = mine(x, mask=mask, need_weights=True)
    fast, none = mine(x, mask=mask)
    ref_out = ref(x, src_key_padding_mask=~mask)
    assert len(attns) == 3 and none is None
    assert (out - ref_out).abs().max() <= 1e-5 and (fast - ref_out).abs().max() <= 1e-5


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_encoder_is_permutation_equivariant_without_positions(impl: str):
    torch.manual_seed(2)
    layer = TransformerEncoderLayer(
        d_model=16, num_heads=4, dim_feedforward=32, dropout=0.0, norm_first=True, attention_impl=impl
    )
    enc = TransformerEncoder(layer, num_layers=2).eval()
    x = torch.randn(2, 7, 16)
    perm = torch.randperm(7)
    out, _ = enc(x)
    out_p, _ = enc(x[:, perm])
    torch.testing.assert_close(out_p, out[:, perm])


def test_activation_and_settings():
    torch.manual_seed(3)
    gelu = TransformerEncoderLayer(d_model=8, num_heads=2, dim_feedforward=16, dropout=0.0, activation="gelu")
    ref = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True, layer_norm_eps=1e-5)
    ref.load_state_dict(copy_into_torch_layer(gelu, False, torch.float32).state_dict())
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(gelu(x)[0], ref.train()(x))
    with pytest.raises(ValueError, match="activation='tanh'.*relu, gelu"):
        TransformerEncoderLayer(d_model=8, num_heads=2, dim_feedforward=16, activation="tanh")
    eps = TransformerEncoderLayer(d_model=8, num_heads=2, dim_feedforward=16, layer_norm_eps=1e-3)
    assert eps.norm1.eps == eps.norm2.eps == 1e-3
    assert eps.self_attn.dropout.p == 0.1  # attention_dropout None: the residual dropout
