"""The model on a CUDA GPU: every attention path equal to the math and to PyTorch's own layers, in fp32 (the CPU's
tolerance) and bf16, padding invariance, rows with no key and head gates (the branches that only a GPU
reaches). Skipped without a GPU; needs torch and this package only (no conftest), so a bare GPU
machine runs it: `PYTHONPATH=src python -m pytest -q --noconftest tests/test_cuda.py`.

bf16's tolerance: 8 bits of mantissa give a relative step of 2^-8 (0.004) per rounding; a layer rounds its inputs,
its Q/K/V, its scores, weights and each matmul's output, so its outputs (of order 1 after LayerNorm) carry a few
such steps: 3e-2, as the CPU's bf16 tests use."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_attention.model import (
    ATTENTION_IMPLS,
    MultiHeadAttention,
    TransformerClassifier,
    TransformerEncoderLayer,
    gated_heads,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CUDA = torch.device("cuda")
BF16_TOL = 3e-2


def lengths_mask(lengths: list[int], T: int) -> torch.Tensor:
    return (torch.arange(T)[None] < torch.tensor(lengths)[:, None]).to(CUDA)  # (B, T)


def torch_layer(mine: TransformerEncoderLayer, norm_first: bool) -> nn.TransformerEncoderLayer:
    """PyTorch's layer with our weights: its fused in_proj is our w_q, w_k, w_v stacked."""
    a = mine.self_attn
    ref = nn.TransformerEncoderLayer(
        a.d_model, a.num_heads, mine.linear1.out_features, dropout=0.0, batch_first=True, norm_first=norm_first
    ).to(CUDA)
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([a.w_q.weight, a.w_k.weight, a.w_v.weight]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([a.w_q.bias, a.w_k.bias, a.w_v.bias]))
        ref.self_attn.out_proj.load_state_dict(a.w_o.state_dict())
        for name in ("linear1", "linear2", "norm1", "norm2"):
            getattr(ref, name).load_state_dict(getattr(mine, name).state_dict())
    return ref


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("norm_first", [False, True])
def test_every_path_matches_torchs_layer_in_fp32_and_bf16(impl: str, norm_first: bool):
    torch.manual_seed(0)
    mine = TransformerEncoderLayer(
        d_model=64, num_heads=4, dim_feedforward=128, dropout=0.0, norm_first=norm_first, attention_impl=impl
    ).to(CUDA)
    ref = torch_layer(mine, norm_first)
    x = torch.randn(4, 33, 64, device=CUDA)
    mask = lengths_mask([33, 20, 7, 1], 33)
    mine.train(), ref.train()  # dropout 0; torch's plain path, not its nested-tensor one
    out, _ = mine(x, mask=mask)
    expected = ref(x, src_key_padding_mask=~mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        low, _ = mine(x, mask=mask)
    assert low.dtype in (torch.bfloat16, torch.float32) and torch.isfinite(low).all()
    torch.testing.assert_close(low.float(), expected, atol=BF16_TOL, rtol=BF16_TOL)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_every_path_equals_the_math_with_gradients(impl: str):
    torch.manual_seed(1)
    ref = MultiHeadAttention(32, 4, dropout=0.0, attention_impl="math").to(CUDA)
    other = MultiHeadAttention(32, 4, dropout=0.0, attention_impl=impl).to(CUDA)
    other.load_state_dict(ref.state_dict())
    x = torch.randn(3, 17, 32, device=CUDA)
    mask = lengths_mask([17, 9, 0], 17)  # the last row sees no key: zeros, never NaN
    grad = torch.randn(3, 17, 32, device=CUDA)
    outs = []
    for mha in (ref, other):
        xi = x.clone().requires_grad_()
        out, _ = mha(xi, mask=mask, need_weights=False)
        (dx,) = torch.autograd.grad(out, xi, grad)
        outs.append((out, dx))
    (out_a, dx_a), (out_b, dx_b) = outs
    assert torch.isfinite(out_b).all() and torch.isfinite(dx_b).all()
    torch.testing.assert_close(out_b, out_a, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dx_b, dx_a, atol=1e-5, rtol=1e-5)
    assert torch.all(out_b[2] == ref.w_o.bias)  # no key: zero attention, only W_O's bias


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_padding_changes_no_logit_and_the_gpu_agrees_with_the_cpu(impl: str, pooling: str):
    torch.manual_seed(2)
    net = TransformerClassifier(
        vocab_size=100, num_classes=3, d_model=32, num_heads=4, num_layers=2, pooling=pooling, attention_impl=impl
    ).eval()
    tokens = torch.randint(3, 100, (4, 12))
    tokens[:, 0] = 2
    lengths = [12, 8, 3, 1]
    for b, n in enumerate(lengths):
        tokens[b, n:] = 0
    on_cpu = net(tokens).logits
    net = net.to(CUDA)
    with torch.no_grad():
        logits = net(tokens.to(CUDA)).logits
        longer = net(torch.cat([tokens, torch.zeros(4, 5, dtype=tokens.dtype)], dim=1).to(CUDA)).logits
        alone = torch.cat([net(tokens[b : b + 1, :n].to(CUDA)).logits for b, n in enumerate(lengths)])
    torch.testing.assert_close(longer, logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits.cpu(), on_cpu, atol=1e-5, rtol=1e-5)


def test_a_zero_gate_equals_zeroing_the_heads_columns_of_w_o():
    torch.manual_seed(3)
    kw = dict(vocab_size=100, num_classes=2, d_model=32, num_heads=4, num_layers=2, pooling="mean")
    net = TransformerClassifier(**kw).to(CUDA).eval()
    oracle = TransformerClassifier(**kw).to(CUDA).eval()
    oracle.load_state_dict(net.state_dict())
    gates = torch.ones(2, 4, device=CUDA)
    gates[1, 2] = 0
    tokens = torch.randint(3, 100, (3, 10), device=CUDA)
    with torch.no_grad():
        oracle.encoder.layers[1].self_attn.w_o.weight[:, 16:24] = 0  # head 2 of 4, Dk = 8
        with gated_heads(net, gates):
            gated = net(tokens).logits
        torch.testing.assert_close(gated, oracle(tokens).logits, atol=1e-6, rtol=0)
