"""A seeded random score per token: the floor any method should beat. Each row's scores come from the seed and the
row's position among the rows explained, so they do not depend on how the rows were batched."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ...model.classifier import TransformerClassifier
from ..passes import Passes
from . import Explanation, Method, Options, register


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    index = options.index or tuple(range(ids.shape[0]))
    scores = torch.zeros(ids.shape, dtype=torch.float64)
    for b, i in enumerate(index):
        n = int(mask[b].sum())
        scores[b, :n] = torch.from_numpy(np.random.default_rng([options.seed, i]).random(n))
    return Explanation(scores)


def passes(length: int, classes: int, options: Options) -> Passes:
    return Passes()


register(Method("random", "random", signed=False, explain=explain, passes=passes))
