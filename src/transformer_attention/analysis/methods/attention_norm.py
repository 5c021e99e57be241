"""Attention x norm (Kobayashi et al. 2020, "Attention is Not Only a Weight"): the last layer's ||alpha_ij f(x_j)||,
the weight times the length of what key j moves, mean of heads, the pooled row."""

from __future__ import annotations

from torch import Tensor

from ... import inference
from ...model.classifier import TransformerClassifier, pool
from . import Explanation, Method, Options, register
from ._maps import head_means


def norm_maps(net: TransformerClassifier, ids: Tensor, mask: Tensor) -> list[Tensor]:
    """Every layer's norm-weighted map (B, H, T, T), in eval mode without gradients (model.probes)."""
    maps = inference.forward(net, ids, mask, need_norms=True).attentions
    assert maps is not None  # a norm-weighted pass always gives them
    return maps


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    return Explanation(pool(head_means(norm_maps(net, ids, mask))[-1], mask, net.config.pooling))


register(Method("attention_norm", "attention x norm (last layer)", signed=False, explain=explain))
