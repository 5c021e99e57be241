"""The last layer's attention of the row the classifier pools, the mean of its heads: what the project's maps
show, as a ranking of the words (unsigned: a weight says where a row looks, not which way it pushes)."""

from __future__ import annotations

from torch import Tensor

from ... import inference
from ...model.classifier import TransformerClassifier, pool
from . import Explanation, Method, Options, register
from ._maps import head_means


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    out = inference.forward(net, ids, mask, need_weights=True)
    assert out.attentions is not None  # asked for
    return Explanation(pool(head_means(out.attentions)[-1], mask, net.config.pooling))


register(Method("attention", "attention (last layer)", signed=False, explain=explain))
