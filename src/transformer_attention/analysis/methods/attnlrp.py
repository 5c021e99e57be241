"""AttnLRP (Achtibat et al., ICML 2024, "AttnLRP: Attention-Aware Layer-Wise Relevance Propagation for
Transformers"), in its gradient x input form: one backward pass of the explained class's logit through the
network with the relevance rules written as gradient changes (_forward.py): LayerNorm's scale held (identity
rule), each activation by its secant act(u) / u (identity rule), and the two products of live inputs, Q K^T and
alpha V, passing half the gradient to each factor (uniform rule); the softmax keeps its gradient. A word's
relevance is that gradient times its embedding (the word vector and the n-gram vectors it ends), summed over the
features, plus its exact share of the naive-Bayes term where the model has one (decompx.evidence_shares).
Signed."""

from __future__ import annotations

import torch
from torch import Tensor

from ...model.classifier import TransformerClassifier
from ..passes import Passes
from . import Explanation, Method, Options, register
from ._forward import Rules, run
from .decompx import evidence_shares

ATTNLRP = Rules(freeze_norms=True, secant=True, halve_products=True)


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    with torch.enable_grad():
        trace = run(net, ids, mask, ATTNLRP)
        chosen = trace.logits.gather(1, target.view(-1, 1)).sum()
        (grad,) = torch.autograd.grad(chosen, trace.x0)  # (B, T, D)
    embedding = trace.words + sum(trace.ngrams, torch.zeros_like(trace.words))  # (B, T, D)
    relevance = (grad * embedding).sum(dim=-1) * mask.to(grad.dtype)  # (B, T)
    return Explanation(relevance + evidence_shares(net, ids, mask, target).to(relevance.dtype))


def passes(length: int, classes: int, options: Options) -> Passes:
    return Passes(forward=1, backward=1)


register(Method("attnlrp", "AttnLRP", signed=True, explain=explain, passes=passes))
