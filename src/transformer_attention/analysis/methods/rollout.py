"""Attention rollout (Abnar & Zuidema 2020) through every layer, the pooled row: each layer's head mean mixed
half and half with the residual path, multiplied from the first layer up (plotting/rollout.py, as the views draw
it)."""

from __future__ import annotations

from torch import Tensor

from ... import inference
from ...model.classifier import TransformerClassifier
from . import Explanation, Method, Options, register
from ._maps import head_means, pooled_rollout


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    out = inference.forward(net, ids, mask, need_weights=True)
    assert out.attentions is not None  # asked for
    return Explanation(pooled_rollout(net, head_means(out.attentions), mask, residual=0.5))


register(Method("rollout", "rollout", signed=False, explain=explain))
