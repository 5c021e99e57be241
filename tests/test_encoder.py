"""TransformerEncoderLayer against torch.nn.TransformerEncoderLayer(batch_first=True), both norm orders."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_attention.model import TransformerEncoder, TransformerEncoderLayer


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


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("masked", [False, True])
def test_layer_matches_torch(norm_first: bool, dtype: torch.dtype, tol: float, masked: bool):
    torch.manual_seed(0)
    mine = TransformerEncoderLayer(32, 4, 64, dropout=0.0, norm_first=norm_first).to(dtype)
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
        out, w = mine(x, mask=mask, need_weights=True)
        ref_out = ref(x, src_key_padding_mask=None if mask is None else ~mask)
    real = torch.ones(3, 9, dtype=torch.bool) if mask is None else mask
    assert (out - ref_out)[real].abs().max() <= tol
    assert w.shape == (3, 4, 9, 9)


def test_stack_matches_torch_encoder():
    torch.manual_seed(1)
    layer = TransformerEncoderLayer(16, 2, 32, dropout=0.0)
    mine = TransformerEncoder(layer, num_layers=3).train()
    ref = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 3, enable_nested_tensor=False
    ).train()
    for m, r in zip(mine.layers, ref.layers, strict=True):
        r.load_state_dict(copy_into_torch_layer(m, False, torch.float32).state_dict())
    x = torch.randn(2, 6, 16)
    mask = torch.arange(6)[None] < torch.tensor([6, 3])[:, None]
    out, attns = mine(x, mask=mask, need_weights=True)
    assert len(attns) == 3
    assert (out - ref(x, src_key_padding_mask=~mask)).abs().max() <= 1e-5


def test_encoder_is_permutation_equivariant_without_positions():
    torch.manual_seed(2)
    enc = TransformerEncoder(TransformerEncoderLayer(16, 4, 32, dropout=0.0, norm_first=True), 2).eval()
    x = torch.randn(2, 7, 16)
    perm = torch.randperm(7)
    out, _ = enc(x)
    out_p, _ = enc(x[:, perm])
    torch.testing.assert_close(out_p, out[:, perm])
