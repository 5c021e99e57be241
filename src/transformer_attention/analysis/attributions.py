"""Token attributions: how much each token of a text counts towards a class, by every explanation method the
registry holds (methods/: one file per method, `methods.methods()` lists them), each a (T,) array per text
(position 0, the [CLS], included but never ranked). `attribute` runs the chosen methods on rows of token ids,
batched by length so that a batch of long rows holds no more than `TOKEN_BUDGET` attention cells, and times each.

The class explained is given per row (the predicted one in the faithfulness tables: a probability saturates
near 1, so the gradient methods explain the logit). Shapes: N texts, B a batch, T tokens, C classes.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence

import numpy as np
import torch

from ..inference import batched, device_of
from ..model.classifier import TransformerClassifier
from . import methods as registry
from .passes import Passes

TOKEN_BUDGET = 2**22  # rows x T x T per batch at most: a batch's (B, H, T, T) maps stay a few hundred MB


def float64_capable(net: TransformerClassifier) -> TransformerClassifier:
    """`net`, or where its device has no float64 (Apple's MPS) a copy of it on the CPU: the analyses run in
    float64."""
    return copy.deepcopy(net).cpu() if device_of(net).type == "mps" else net


def attribute(
    net: TransformerClassifier,
    rows: Sequence[Sequence[int]],
    targets: Sequence[int],
    *,
    mask_id: int | None,
    methods: Sequence[str] | None = None,
    ig_steps: int = 32,
    seed: int = 0,
    batch_size: int = 256,
    seconds: dict[str, float] | None = None,
) -> tuple[list[dict[str, np.ndarray]], float]:
    """Each method's (T,) attribution of every row of `rows` (token ids, [CLS] first) to its class in `targets`
    (`methods`: registered names, None for all), and Integrated Gradients' mean relative completeness error
    (NaN when it did not run). `mask_id`: what a removed word becomes (None: deleted). `seconds`, when given,
    gains each method's time (method -> seconds, added to)."""
    chosen = registry.check_methods(registry.default_names() if methods is None else methods)
    known = registry.methods()
    net = float64_capable(net)
    out: list[dict[str, np.ndarray]] = [{} for _ in rows]
    errors: list[float] = []
    for name in chosen:
        method, start = known[name], time.perf_counter()
        cap = rows_per_batch(method, rows, ig_steps, batch_size, classes=net.head.out_features)
        for group in groups(rows, cap=cap):
            (batch,) = batched(net, [rows[i] for i in group], batch_size=None)
            target = torch.tensor([int(targets[i]) for i in group], device=batch.ids.device)
            options = registry.Options(
                ig_steps=ig_steps, seed=seed, mask_id=mask_id, batch_size=batch_size, index=tuple(group)
            )
            found = method.explain(net, batch.ids, batch.mask, target, options)
            scores = found.scores.detach().double().cpu().numpy()  # (B, T)
            for b, i in enumerate(group):
                out[i][name] = scores[b, : len(rows[i])]
            errors += found.extra.get("completeness_error", torch.empty(0)).tolist()
        if seconds is not None:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
    return out, float(np.mean(errors)) if errors else float("nan")


def rows_per_batch(
    method: registry.Method, rows: Sequence[Sequence[int]], ig_steps: int, batch_size: int, classes: int
) -> int:
    """How many rows a batch of `method` takes: `batch_size` forward passes' worth (a method that runs a row
    forward k times takes batch_size / k rows), at least one."""
    longest = max((len(r) for r in rows), default=1)
    options = registry.Options(ig_steps=ig_steps, batch_size=batch_size)
    return max(1, batch_size // max(1, method.passes(longest, classes, options).forward))


def groups(rows: Sequence[Sequence[int]], *, cap: int, budget: int = TOKEN_BUDGET) -> list[list[int]]:
    """Row indices in batches, the shortest rows together: at most `cap` rows, and rows x T x T (T the longest
    in the batch) at most `budget` unless the batch is one row."""
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i]), i))
    out: list[list[int]] = []
    for i in order:
        T = len(rows[i])
        if out and len(out[-1]) < cap and (len(out[-1]) + 1) * T * T <= budget:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def passes(
    rows: Sequence[Sequence[int]], *, methods: Sequence[str] | None = None, ig_steps: int = 32, classes: int = 2
) -> Passes:
    """The model work of `attribute` on `rows`: each chosen method's `passes` for each row, summed."""
    known = registry.methods()
    options = registry.Options(ig_steps=ig_steps)
    total = Passes()
    for name in registry.default_names() if methods is None else methods:
        for row in rows:
            total += known[name].passes(len(row), classes, options)
    return total
