"""The last layer's attention of the row the classifier pools, the mean of its heads: what the project's maps
show, as a ranking of the words (unsigned: a weight says where a row looks, not which way it pushes)."""

from __future__ import annotations

import torch
from torch import Tensor

from ... import inference
from ...model.classifier import TransformerClassifier
from . import Explanation, Method, Options, register
from ._maps import head_means, pooled


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    out = inference.forward(net, ids, mask, need_weights=True)
    assert out.attentions is not None  # asked for
    means = head_means(out.attentions)
    return Explanation(pooled(means[-1], mask, net.config.pooling), maps=torch.stack(means, dim=1))


register(Method("attention", "attention (last layer)", signed=False, family="attention", explain=explain))
