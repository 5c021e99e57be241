"""The two attention paths (math, sdpa) are one function: same outputs, same gradients, same zeros on rows with
no key, same checkpoints; sdpa never holds a T x T tensor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_attention.model import (
    ATTENTION_IMPLS,
    MultiHeadAttention,
    TransformerClassifier,
    causal_mask,
)


def lengths_mask(lengths: list[int], T: int) -> torch.Tensor:
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)


def masks(B: int, Tq: int, Tk: int) -> dict[str, torch.Tensor | None]:
    """Every mask form attention accepts, each with at least one row that sees no key."""
    g = torch.Generator().manual_seed(0)
    pair = torch.rand(B, Tq, Tk, generator=g) < 0.4
    pair[0, 1] = False  # one query with no key
    pair[1, :, : Tk // 2] = False  # whole key blocks masked for batch row 1
    shared = torch.rand(Tq, Tk, generator=g) < 0.5
    shared[2] = False
    lengths = [Tk, max(1, Tk // 3)] + [0] * (B - 2)  # the last rows are all padding
    out = {"none": None, "padding": lengths_mask(lengths, Tk), "pair": pair, "shared": shared}
    if Tq == Tk:
        out["causal"] = causal_mask(Tq)
    return out


def mha_pair(impl: str, D: int = 12, H: int = 3, dtype=torch.float64) -> tuple[MultiHeadAttention, MultiHeadAttention]:
    torch.manual_seed(0)
    ref = MultiHeadAttention(D, H, dropout=0.0, attention_impl="math").to(dtype)
    other = MultiHeadAttention(D, H, dropout=0.0, attention_impl=impl).to(dtype)
    other.load_state_dict(ref.state_dict())  # same parameter names for every path
    return ref, other


def run(mha: MultiHeadAttention, x: torch.Tensor, kv: torch.Tensor | None, mask, grad: torch.Tensor):
    """Forward + backward; kv None is self-attention, `mha(x)` (the fused QKV projection)."""
    x = x.clone().requires_grad_()
    if kv is None:
        out, _ = mha(x, mask=mask, need_weights=False)
    else:
        kv = kv.clone().requires_grad_()
        out, _ = mha(x, kv, kv, mask=mask, need_weights=False)
    out.backward(grad)
    grads = [x.grad] + ([] if kv is None else [kv.grad]) + [p.grad for p in mha.parameters()]
    return out.detach(), grads


@pytest.mark.parametrize("cross", [False, True])
def test_paths_agree_on_outputs_and_gradients_float64(cross: bool):
    impl = "sdpa"
    B, Tq = 3, 11
    Tk = 7 if cross else Tq
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, Tq, 12, generator=g, dtype=torch.float64)
    kv = torch.randn(B, Tk, 12, generator=g, dtype=torch.float64) if cross else None
    grad = torch.randn(B, Tq, 12, generator=g, dtype=torch.float64)
    for name, mask in masks(B, Tq, Tk).items():
        ref, other = mha_pair(impl)
        ref_out, ref_grads = run(ref, x, kv, mask, grad)
        out, grads = run(other, x, kv, mask, grad)
        torch.testing.assert_close(out, ref_out, atol=1e-12, rtol=0, msg=f"{impl} output, {name} mask")
        for a, b in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(a, b, atol=1e-11, rtol=0, msg=f"{impl} gradient, {name} mask")


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_rows_with_no_key_give_zero_output_and_zero_gradient(impl: str):
    torch.manual_seed(5)
    mha = MultiHeadAttention(8, 2, dropout=0.0, attention_impl=impl)
    x = torch.randn(3, 5, 8, requires_grad=True)
    mask = lengths_mask([5, 3, 0], 5)  # batch row 2 is all padding
    out, _ = mha(x, x, x, mask=mask, need_weights=False)
    assert torch.isfinite(out).all()
    # no key: attention gives zeros, so the row's output is w_o's bias alone
    torch.testing.assert_close(out[2], mha.w_o.bias.expand(5, 8))
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert torch.all(x.grad[2] == 0)  # nothing flows into a row no query can see
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


def test_bf16_autocast_paths_stay_close_to_fp32_math():
    impl = "sdpa"
    torch.manual_seed(6)
    ref, other = mha_pair(impl, D=32, H=4, dtype=torch.float32)
    x = torch.randn(4, 40, 32)
    mask = lengths_mask([40, 30, 12, 0], 40)
    expected, _ = ref(x, x, x, mask=mask, need_weights=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = other(x, x, x, mask=mask, need_weights=False)
        math_out, _ = ref(x, x, x, mask=mask, need_weights=False)
    for got in (out, math_out):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got.float(), expected, atol=3e-2, rtol=3e-2)


def test_weights_always_come_from_the_math_path():
    ref, other = mha_pair("sdpa")
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    mask = lengths_mask([6, 2], 6)
    out_a, w_a = ref(x, x, x, mask=mask, need_weights=True)
    out_b, w_b = other(x, x, x, mask=mask, need_weights=True)
    assert torch.equal(w_a, w_b) and torch.equal(out_a, out_b)


def test_a_model_trained_with_one_path_predicts_the_same_with_the_others():
    torch.manual_seed(8)
    kwargs = dict(
        vocab_size=50, num_classes=3, d_model=16, num_heads=2, num_layers=2, dim_feedforward=32, max_len=32, dropout=0.1
    )
    trained = TransformerClassifier(**kwargs, attention_impl="math")
    opt = torch.optim.AdamW(trained.parameters(), lr=1e-2)
    tokens = torch.randint(3, 50, (8, 12))
    tokens[:, 0] = 2
    tokens[4:, 7:] = 0  # padding
    labels = torch.randint(0, 3, (8,))
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(trained(tokens).logits, labels).backward()
        opt.step()
    trained.eval()
    expected = trained(tokens).logits
    for impl in ATTENTION_IMPLS:
        model = TransformerClassifier(**kwargs, attention_impl=impl).eval()
        model.load_state_dict(trained.state_dict())  # strict: the very same keys
        torch.testing.assert_close(model(tokens).logits, expected, atol=1e-5, rtol=1e-5)


PEAK = """
import sys, torch
from pathlib import Path
from transformer_attention.model import MultiHeadAttention
def status(key):  # kB
    return int(next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(key)).split()[1])
B, T, D, H = 2, 2048, 16, 2
torch.manual_seed(0)
x, mask = torch.randn(B, T, D), torch.arange(T)[None, :] < torch.tensor([[T], [1400]])
mha = MultiHeadAttention(D, H, dropout=0.0, attention_impl=sys.argv[1])
Path("/proc/self/clear_refs").write_text("5")  # the kernel's peak resident size starts again from now
before = status("VmRSS:")
mha(x, x, x, mask=mask, need_weights=False)[0].sum().backward()
print(status("VmHWM:") - before)  # KiB the step's peak added
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc peak resident size")
def test_sdpa_memory_is_far_below_one_score_matrix():
    """A forward and backward at T=2048 on each path, each in its own process: the peak resident memory the step
    adds, against one fp32 (B, H, T, T) tensor (64 MiB), which the math path holds several of."""
    score_kib = 2 * 2 * 2048 * 2048 * 4 // 1024

    def peak_kib(impl: str) -> int:
        done = subprocess.run([sys.executable, "-c", PEAK, impl], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    math, sdpa = peak_kib("math"), peak_kib("sdpa")
    assert math > 2 * score_kib, (math, sdpa)  # the measure sees T x T tensors when there are some
    assert sdpa < score_kib / 2, (math, sdpa)  # not one of them


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_a_layer_computing_only_the_first_rows_matches_the_full_layer(norm_first: bool, impl: str):
    from transformer_attention.model import TransformerEncoderLayer

    torch.manual_seed(9)
    layer = TransformerEncoderLayer(
        d_model=12, num_heads=3, dim_feedforward=24, dropout=0.0, norm_first=norm_first, attention_impl=impl
    ).double()
    x = torch.randn(3, 9, 12, dtype=torch.float64)
    for name, mask in masks(3, 9, 9).items():
        full, _ = layer(x, mask=mask)
        for queries in (1, 4):
            part, _ = layer(x, mask=mask, queries=queries)
            assert part.shape == (3, queries, 12)
            torch.testing.assert_close(part, full[:, :queries], atol=1e-12, rtol=0, msg=f"{name} mask, {queries} rows")


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("norm_first", [False, True])
def test_cls_pooling_logits_are_the_same_with_and_without_the_full_last_layer(norm_first: bool, impl: str):
    """need_weights=True computes every row of the last layer (on the math path), False only [CLS]
    (on `impl`): same logits and gradients."""
    torch.manual_seed(10)
    model = TransformerClassifier(
        vocab_size=50,
        num_classes=3,
        d_model=16,
        num_heads=2,
        num_layers=2,
        dim_feedforward=32,
        max_len=32,
        dropout=0.0,
        norm_first=norm_first,
        attention_impl=impl,
    ).double()
    tokens = torch.randint(3, 50, (4, 10))
    tokens[:, 0] = 2
    tokens[2:, 6:] = 0
    cls_only = model(tokens).logits
    grads_cls = torch.autograd.grad(cls_only.sum(), list(model.parameters()))
    full = model(tokens, need_weights=True).logits
    grads_full = torch.autograd.grad(full.sum(), list(model.parameters()))
    torch.testing.assert_close(cls_only, full, atol=1e-12, rtol=0)
    for a, b in zip(grads_cls, grads_full, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_a_checkpoint_loads_with_any_path_and_predicts_the_same(tmp_path):
    """`ClassifierModule.load_from_checkpoint(path, attention_impl=...)` switches the path only."""
    import lightning as L

    from transformer_attention.module import ClassifierModule

    torch.manual_seed(11)
    module = ClassifierModule(
        vocab_size=50, num_classes=2, d_model=16, num_heads=2, num_layers=2, dim_feedforward=32, attention_impl="sdpa"
    ).eval()
    path = tmp_path / "model.ckpt"
    torch.save(
        {
            "state_dict": module.state_dict(),
            "hyper_parameters": dict(module.hparams),
            "pytorch-lightning_version": L.__version__,
        },
        path,
    )
    tokens = torch.randint(3, 50, (5, 9))
    tokens[:, 0], tokens[3:, 5:] = 2, 0
    expected = module(tokens).logits
    for impl in ATTENTION_IMPLS:
        loaded = ClassifierModule.load_from_checkpoint(path, attention_impl=impl).eval()
        assert loaded.net.encoder.layers[0].self_attn.attention_impl == impl
        torch.testing.assert_close(loaded(tokens).logits, expected, atol=1e-5, rtol=1e-5)
