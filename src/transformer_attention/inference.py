"""One inference path: token-id rows in; each row's logits, probabilities and, when asked, every
layer's attention out. `predict.predict` and `AttentionMapLogger` both run the model through `infer`.

The model runs in eval mode (no dropout: the attention it returns is what it computed) and without
gradients, on its own device; afterwards every submodule is back in the mode it was in, frozen
(eval-mode) parts of a training model included, even when the forward raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from .data.batches import collate
from .data.tokenizer import PAD_ID


@dataclass(frozen=True)
class RowOutput:
    """What the model gives for one row, on the CPU, in float32 (C classes, T the row's real tokens)."""

    logits: torch.Tensor  # (C,)
    probabilities: torch.Tensor  # (C,), softmax of the logits
    attentions: list[torch.Tensor] | None = field(default=None, repr=False)  # one (H, T, T) per layer


def infer(
    model: nn.Module,
    ids: Sequence[Sequence[int]],
    *,
    pad_id: int = PAD_ID,
    need_weights: bool = False,
    batch_size: int | None = None,
) -> list[RowOutput]:
    """Run `model` (a ClassifierModule or TransformerClassifier: `model(ids, mask, need_weights=...)`
    returning `(logits, attentions)`) on `ids`, `batch_size` rows at a time (None: all at once), each
    batch padded with `pad_id` to its longest row and masked; one RowOutput per row, in order."""
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1 (or None: all rows in one batch)")
    modes = {m: m.training for m in model.modules()}  # restored exactly, frozen parts included
    model.eval()
    try:
        with torch.no_grad():
            step = batch_size or max(len(ids), 1)
            results: list[RowOutput] = []
            for start in range(0, len(ids), step):
                results += _batch(model, ids[start : start + step], pad_id=pad_id, need_weights=need_weights)
            return results
    finally:
        for m, training in modes.items():
            m.train(training)


def _batch(model: nn.Module, rows: Sequence[Sequence[int]], *, pad_id: int, need_weights: bool) -> list[RowOutput]:
    """One padded batch through the model, split back into rows."""
    device = next(model.parameters()).device
    batch = collate([{"input_ids": row, "labels": 0} for row in rows], pad_id=pad_id)
    out = model(batch["input_ids"].to(device), batch["attention_mask"].to(device), need_weights=need_weights)
    logits = out.logits.float().cpu()  # (B, C)
    probs = logits.softmax(dim=-1)  # (B, C)
    layers = [a.float().cpu() for a in out.attentions] if need_weights else []  # each (B, H, T, T)
    results = []
    for b, row in enumerate(rows):
        T = len(row)  # real tokens: the batch's padding is cut off
        attentions = [a[b, :, :T, :T] for a in layers] if need_weights else None  # each (H, T, T)
        results.append(RowOutput(logits=logits[b], probabilities=probs[b], attentions=attentions))
    return results
