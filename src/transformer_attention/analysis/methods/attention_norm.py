"""Attention x norm (Kobayashi et al. 2020, "Attention is Not Only a Weight"): the last layer's ||alpha_ij f(x_j)||,
the weight times the length of what key j moves, mean of heads, the pooled row."""

from __future__ import annotations

import torch
from torch import Tensor

from ... import inference
from ...model.classifier import TransformerClassifier
from . import Explanation, Method, Options, register
from ._maps import head_means, pooled


def norm_maps(net: TransformerClassifier, ids: Tensor, mask: Tensor) -> list[Tensor]:
    """Every layer's norm-weighted map (B, H, T, T), in eval mode without gradients (model.probes)."""
    maps = inference.forward(net, ids, mask, need_norms=True).attentions
    assert maps is not None  # a norm-weighted pass always gives them
    return maps


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    means = head_means(norm_maps(net, ids, mask))
    return Explanation(pooled(means[-1], mask, net.config.pooling), maps=torch.stack(means, dim=1))


register(Method("attention_norm", "attention x norm (last layer)", signed=False, family="attention", explain=explain))
