"""Batched forward passes for the analyses: many token-id rows (the texts, and copies of them with words removed)
through the model in eval mode, without gradients, shortest rows together so that a batch pads little.

Shapes: N rows, B a batch, T its longest row, C classes, L layers, H heads.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn

from ..data.batches import collate
from ..data.tokenizer import PAD_ID
from ..module import evaluating


def batches(
    rows: Sequence[Sequence[int]], labels: Sequence[int] | None = None, *, batch_size: int, pad_id: int = PAD_ID
) -> Iterator[tuple[list[int], dict[str, torch.Tensor]]]:
    """The rows in padded batches of about equal length: (the rows' indices, the batch), shortest first."""
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i]), i))
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        items = [{"input_ids": rows[i], "labels": 0 if labels is None else int(labels[i])} for i in index]
        yield index, collate(items, pad_id=pad_id)


def probabilities(
    net: nn.Module,
    rows: Sequence[Sequence[int]],
    *,
    batch_size: int,
    pad_id: int = PAD_ID,
    head_mask: torch.Tensor | None = None,
) -> np.ndarray:
    """(N, C) float64: the softmax of `net(rows)` (a TransformerClassifier), in the rows' order."""
    device = next(net.parameters()).device
    out: np.ndarray | None = None
    gates = None if head_mask is None else head_mask.to(device)  # (L, H)
    with evaluating(net), torch.no_grad():
        for index, batch in batches(rows, batch_size=batch_size, pad_id=pad_id):
            ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)  # (B, T)
            probs = net(ids, mask, head_mask=gates).logits.double().softmax(dim=-1).cpu().numpy()  # (B, C)
            if out is None:
                out = np.empty((len(rows), probs.shape[1]))
            out[index] = probs
    return np.empty((0, 0)) if out is None else out
