"""`precision=auto`: timed on this machine, weights untouched, refused where one process cannot speak for all."""

from __future__ import annotations

import torch
from conftest import run_entry

from transformer_attention.data.batches import collate
from transformer_attention.module import ClassifierModule
from transformer_attention.training.precision import CANDIDATES, pick_precision


def test_pick_precision_times_both_and_leaves_the_model_as_it_was(caplog):
    torch.manual_seed(0)
    module = ClassifierModule(vocab_size=60, num_classes=2, d_model=16, num_heads=2, num_layers=1, dropout=0.1)
    module.eval()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    batch = collate([{"input_ids": [2, *range(5, 5 + n)], "labels": n % 2} for n in (3, 7, 11, 4)])
    with caplog.at_level("INFO"):
        chosen = pick_precision(module, batch, steps=2)
    assert chosen in CANDIDATES
    assert "ms in fp32" in caplog.text and "ms in bf16-mixed" in caplog.text and chosen in caplog.text
    after = module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in module.parameters())
    assert not any(m.training for m in module.modules())  # its modes are restored too


def test_auto_precision_runs_and_is_refused_for_ddp(tiny_overrides):
    proc = run_entry("train.py", *tiny_overrides, "trainer.precision=auto", "trainer.fast_dev_run=true")
    assert "trainer.precision=auto: a training step takes" in proc.stdout + proc.stderr
    bad = run_entry("train.py", *tiny_overrides, "trainer=ddp_cpu", "trainer.precision=auto", check=False)
    assert bad.returncode != 0 and "trainer.precision=auto times one process" in bad.stderr
