"""bf16-mixed precision on CPU: every attention path stays finite and close to fp32 under
autocast (fully masked rows included), and a real bf16-mixed run trains the toy set as well as fp32."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import run_warm

from transformer_attention.model import ATTENTION_IMPLS, TransformerClassifier

SIZES = dict(vocab_size=200, num_classes=2, d_model=32, num_heads=4, num_layers=2, dim_feedforward=64, max_len=64)


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, 200, (6, 40), generator=g)
    tokens[:, 0] = 2  # [CLS]
    lengths = torch.tensor([40, 31, 17, 8, 2, 1])
    tokens[torch.arange(40)[None, :] >= lengths[:, None]] = 0  # padding
    return tokens, torch.randint(0, 2, (6,), generator=g)


@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_autocast_bf16_forward_and_backward_track_fp32(impl: str, pooling: str):
    torch.manual_seed(1)
    model = TransformerClassifier(**SIZES, dropout=0.0, pooling=pooling, attention_impl=impl)
    tokens, labels = batch()
    expected = model(tokens).logits
    (ref_grad,) = torch.autograd.grad(torch.nn.functional.cross_entropy(expected, labels), [model.head.weight])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(tokens).logits
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()
    torch.testing.assert_close(logits.float(), expected, atol=5e-2, rtol=5e-2)
    loss = torch.nn.functional.cross_entropy(logits.float(), labels)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    torch.testing.assert_close(model.head.weight.grad, ref_grad, atol=5e-2, rtol=5e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("impl", ATTENTION_IMPLS)
def test_autocast_bf16_on_gpu_tracks_fp32(impl: str):
    torch.manual_seed(1)
    model = TransformerClassifier(**SIZES, dropout=0.1, attention_dropout=0.1, attention_impl=impl).cuda()
    tokens, labels = (t.cuda() for t in batch())
    expected = model.eval()(tokens).logits
    model.train()  # dropout on, drawn on the GPU
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(tokens).logits
    torch.nn.functional.cross_entropy(logits.float(), labels).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        eval_logits = model.eval()(tokens).logits
    torch.testing.assert_close(eval_logits.float(), expected, atol=5e-2, rtol=5e-2)


def test_math_path_masks_in_bf16_without_nan():
    """The math path's finfo(dtype).min masking and zeroed rows with no key hold in bf16 too."""
    from transformer_attention.model import scaled_dot_product_attention

    q, k, v = (torch.randn(2, 2, 5, 4, dtype=torch.bfloat16) for _ in range(3))
    mask = torch.tensor([[True, True, False, False, False], [False] * 5])
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert torch.all(w[1] == 0) and torch.all(out[1] == 0) and torch.all(w[0, :, :, 2:] == 0)
    torch.testing.assert_close(w[0].sum(-1).float(), torch.ones(2, 5), atol=1e-2, rtol=0)


@pytest.mark.slow
def test_bf16_mixed_run_trains_the_toy_set_like_fp32(tiny_overrides):
    """A real `python train.py trainer.precision=bf16-mixed` run: >= 95% toy test accuracy."""
    overrides = [o for o in tiny_overrides if not o.startswith(("model.", "data.toy_size", "trainer.max_epochs"))]
    # the default model and toy set, 4 epochs instead of 10 (fp32 reaches 100% with 10, > 99% with 5)
    proc = run_warm(
        "train.py",
        *overrides,
        "trainer.precision=bf16-mixed",
        "trainer.max_epochs=4",
        "callbacks.attention_maps=null",
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert "bfloat16" in out  # Lightning says it runs bf16 autocast
    acc = float(re.search(r"^\s+test/acc\s+([\d.]+)$", proc.stdout.split("final metrics", 1)[1], re.M).group(1))
    assert acc >= 0.95, proc.stdout[-2000:]


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed", "32-true", "bf16-true"])
@pytest.mark.parametrize("clip", [0.0, 1.0])
def test_a_fused_adamw_steps_unfused_exactly_where_lightning_refuses_to_clip_it(precision: str, clip: float):
    """Where the installed Lightning refuses to clip a fused optimizer's gradients (a mixed-precision plugin, fp16 or
    bf16), and only there, the optimizer's own loop steps, with the config's other settings; the step is AdamW's
    either way. A Lightning that accepts bf16 (Lightning-AI/pytorch-lightning#21435) fails this: narrow the rule."""
    import functools

    import lightning as L

    from transformer_attention.module import unfused_where_clipped

    quiet = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer = L.Trainer(accelerator="cpu", precision=precision, gradient_clip_val=clip, **quiet)
    factory = functools.partial(torch.optim.AdamW, lr=0.01, weight_decay=0.1, fused=True)
    probe = torch.nn.Parameter(torch.ones(3))
    probe.grad = torch.ones(3)
    try:
        trainer.precision_plugin.clip_gradients(factory(params=[probe]), clip_val=clip)
        refused = False
    except RuntimeError:  # "does not allow for gradient clipping because it performs unscaling ..."
        refused = True
    made = unfused_where_clipped(factory, trainer)
    assert made.keywords == {"lr": 0.01, "weight_decay": 0.1, "fused": None if refused else True}
    torch.manual_seed(0)
    steps = []
    for f in (factory, made):
        p = torch.nn.Parameter(torch.ones(3, 4))
        p.grad = torch.linspace(-1, 1, 12).view(3, 4)
        f(params=[p]).step()
        steps.append(p.detach().clone())
    torch.testing.assert_close(steps[0], steps[1])
