"""Leave-one-out: the drop in the explained class's probability when that one word is removed (replaced by
[MASK], or deleted: removal.py), all of a batch's variants in one batched pass. Signed."""

from __future__ import annotations

import torch
from torch import Tensor

from ... import inference
from ...model.classifier import TransformerClassifier
from ..passes import Passes
from ..removal import without
from . import Explanation, Method, Options, register


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    rows = [ids[b, : int(mask[b].sum())].tolist() for b in range(ids.shape[0])]
    variants, owners = [], []
    for b, row in enumerate(rows):
        variants.append(row)
        owners.append((b, 0))
        for pos in range(1, len(row)):
            variants.append(without(row, {pos}, options.mask_id))
            owners.append((b, pos))
    probs = inference.probabilities(net, variants, batch_size=options.batch_size)  # (V, C)
    scores = torch.zeros(ids.shape, dtype=torch.float64)
    full: dict[int, float] = {}
    for (b, pos), p in zip(owners, probs, strict=True):
        if pos == 0:
            full[b] = float(p[int(target[b])])
        else:
            scores[b, pos] = full[b] - float(p[int(target[b])])
    return Explanation(scores)


def passes(length: int, classes: int, options: Options) -> Passes:
    """The row with each of its words removed, and the row itself."""
    return Passes(forward=length)


register(Method("leave_one_out", "leave-one-out", signed=True, explain=explain, passes=passes))
