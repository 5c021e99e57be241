"""Integrated Gradients (Sundararajan et al. 2017) on the token embedding (captum's LayerIntegratedGradients),
from a baseline of [PAD] embeddings (zero) in every word's place, [CLS] and the positions kept, in
`ig_steps` steps; summed over the embedding's features. Signed. Reports its completeness error per text:
|sum of attributions - (f(x) - f(baseline))| / |f(x) - f(baseline)|, how well the steps approximate the integral."""

from __future__ import annotations

from captum.attr import LayerIntegratedGradients
from torch import Tensor

from ...inference import logit_function, pad_id_of
from ...model.classifier import TransformerClassifier
from ..passes import Passes
from . import Explanation, Method, Options, register
from .decompx import evidence_shares


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    baseline = ids.masked_fill(mask, pad_id_of(net))  # (B, T): [PAD] (a zero embedding) for every word ...
    baseline[:, 0] = ids[:, 0]  # ... and [CLS] kept: only the words' contribution is measured
    found, delta = LayerIntegratedGradients(logit_function(net), net.embedding).attribute(
        ids,
        baselines=baseline,
        target=target,
        additional_forward_args=(mask,),
        n_steps=options.ig_steps,
        internal_batch_size=options.batch_size,
        return_convergence_delta=True,
    )  # (B, T, D), (B,)
    # the naive-Bayes term reads the words, not their vectors: its change from the baseline, shared exactly
    moved = evidence_shares(net, ids, mask, target) - evidence_shares(net, baseline, mask, target)  # (B, T)
    scores = found.detach().double().sum(dim=-1) + moved  # (B, T)
    total = scores.sum(dim=-1).abs()  # |f(x) - f(baseline)| up to the error
    error = (delta.detach().double() + moved.sum(dim=-1)).abs() / total.clamp(min=1e-12)
    return Explanation(scores, extra={"completeness_error": error})


def passes(length: int, classes: int, options: Options) -> Passes:
    """`ig_steps` forward and backward passes, and four forward ones more (captum's: the embedding of the text
    and of the baseline, and both again for the completeness error)."""
    return Passes(forward=options.ig_steps + 4, backward=options.ig_steps)


register(Method("integrated_gradients", "Integrated Gradients", signed=True, explain=explain, passes=passes))
