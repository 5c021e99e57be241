"""Rollout of attention x norm: each layer's norm-weighted head mean (attention_norm.py) with its rows scaled to
sum 1, the share of what reaches each query, rolled out as the weights are (rollout.py)."""

from __future__ import annotations

from torch import Tensor

from ...model.classifier import TransformerClassifier
from ...plotting.rollout import shares
from . import Explanation, Method, Options, register
from ._maps import head_means, pooled_rollout
from .attention_norm import norm_maps


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    layers = [shares(m) for m in head_means(norm_maps(net, ids, mask))]
    return Explanation(pooled_rollout(net, layers, mask, residual=0.5))


register(Method("attention_norm_rollout", "rollout of attention x norm", signed=False, explain=explain))
