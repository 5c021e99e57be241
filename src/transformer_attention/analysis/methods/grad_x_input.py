"""Gradient x input on the token embedding, summed over its features (captum's LayerGradientXActivation): the
first-order share of each word in the explained class's logit, plus its exact share of the naive-Bayes term where
the model has one (that term reads the words, not their vectors: no gradient reaches it). Signed."""

from __future__ import annotations

from captum.attr import LayerGradientXActivation
from torch import Tensor

from ...inference import logit_function
from ...model.classifier import TransformerClassifier
from ..passes import Passes
from . import Explanation, Method, Options, register
from .decompx import evidence_shares


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    found = LayerGradientXActivation(logit_function(net), net.embedding).attribute(
        ids, target=target, additional_forward_args=(mask,)
    )  # (B, T, D)
    return Explanation(found.detach().double().sum(dim=-1) + evidence_shares(net, ids, mask, target))


def passes(length: int, classes: int, options: Options) -> Passes:
    return Passes(forward=1, backward=1)


register(Method("grad_x_input", "gradient x input", signed=True, explain=explain, passes=passes))
