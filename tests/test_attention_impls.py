"""The three attention paths (math, chunked, sdpa) are one function: same outputs, same
gradients, same zeros on rows with no key, same checkpoints; chunked stays linear in memory."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from transformer_attention.model import (
    ATTENTION_IMPLS,
    MultiHeadAttention,
    TransformerClassifier,
    causal_mask,
    chunked_attention,
    scaled_dot_product_attention,
    sdpa_attention,
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


@pytest.mark.parametrize("impl", ["chunked", "sdpa"])
@pytest.mark.parametrize("cross", [False, True])
def test_paths_agree_on_outputs_and_gradients_float64(impl: str, cross: bool):
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


@pytest.mark.parametrize("blocks", [(1, 1), (2, 3), (4, 5), (16, 4), (None, None)])
def test_chunked_tiles_and_online_softmax_match_math(blocks: tuple[int | None, int | None]):
    """Uneven tiles, many key blocks (the online rescaling) and blocks that are all masked."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(3, 2, 13, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    grad = torch.randn(3, 2, 13, 4, generator=g, dtype=torch.float64)
    for name, mask in masks(3, 13, 13).items():
        ref, _ = scaled_dot_product_attention(q, k, v, mask)
        out = chunked_attention(q, k, v, mask, block_q=blocks[0], block_k=blocks[1])
        ref_grads = torch.autograd.grad(ref, (q, k, v), grad)
        grads = torch.autograd.grad(out, (q, k, v), grad)
        torch.testing.assert_close(out, ref, atol=1e-12, rtol=0, msg=f"output, {name} mask")
        for a, b in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0, msg=f"gradient, {name} mask")


def test_chunked_gradcheck_with_dropout():
    """Backward replays the forward's dropout masks: gradcheck holds with dropout on."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 9, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = lengths_mask([9, 4], 9)

    def f(a, b, c):
        torch.manual_seed(7)  # the same dropout masks for every evaluation gradcheck makes
        return chunked_attention(a, b, c, mask, dropout_p=0.3, block_q=4, block_k=4)

    assert torch.autograd.gradcheck(f, (q, k, v))


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


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_rows_are_opened_and_zeroed_only_where_a_query_sees_no_key(impl: str, monkeypatch: pytest.MonkeyPatch):
    """On a CPU, a mask where every query sees a key (any padding mask whose rows start with [CLS]) skips opening
    and zeroing dead rows, one masked_fill fewer, with bit for bit the outputs and gradients of opening them
    always (as off the CPU); a mask with such a row still gets it zeroed."""
    from transformer_attention.model import attention, chunked
    from transformer_attention.model.masks import dead_rows

    path = {"math": lambda *a: scaled_dot_product_attention(*a)[0], "sdpa": sdpa_attention}
    path["chunked"] = chunked_attention
    torch.manual_seed(3)
    q, k, v = (torch.randn(3, 2, 5, 4, requires_grad=True) for _ in range(3))
    grad = torch.randn(3, 2, 5, 4)
    fills = []
    for lengths in ([5, 3, 1], [5, 0, 2]):  # no dead row; batch row 1 all padding
        mask = lengths_mask(lengths, 5)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            out = path[impl](q, k, v, mask)
        fills.append(sum(e.name == "aten::masked_fill" for e in prof.events()))
        got = torch.autograd.grad(out, (q, k, v), grad)
        with monkeypatch.context() as always_open:
            for module in (attention, chunked):
                always_open.setattr(module, "dead_rows_if_any", dead_rows)
            opened = path[impl](q, k, v, mask)
            expected = torch.autograd.grad(opened, (q, k, v), grad)
        assert torch.equal(out, opened) and all(map(torch.equal, got, expected))
    assert fills[1] == fills[0] + 1


@pytest.mark.parametrize("impl", ["chunked", "sdpa"])
def test_bf16_autocast_paths_stay_close_to_fp32_math(impl: str):
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
    trained = TransformerClassifier(**kwargs, attention_impl="chunked")
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


def peak_bytes(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    running = peak = 0
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    for e in sorted(events, key=lambda e: e.start_ns()):
        running += e.nbytes()
        peak = max(peak, running)
    return peak


def test_chunked_and_sdpa_memory_is_far_below_one_score_matrix():
    B, T, D, H = 2, 2048, 16, 2
    x = torch.randn(B, T, D)
    mask = lengths_mask([T, 1400], T)
    score_bytes = B * H * T * T * 4  # one fp32 (B, H, T, T) tensor: 64 MiB

    def step(impl: str):
        torch.manual_seed(0)
        mha = MultiHeadAttention(D, H, dropout=0.0, attention_impl=impl)
        return lambda: mha(x, x, x, mask=mask, need_weights=False)[0].sum().backward()

    assert peak_bytes(step("math")) > 2 * score_bytes  # the measure sees T x T tensors when there are some
    for impl in ("chunked", "sdpa"):
        assert peak_bytes(step(impl)) < score_bytes / 4, impl


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
