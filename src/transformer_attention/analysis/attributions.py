"""Token attributions: how much each token of a text counts towards the class the model predicts, by eight
methods, every one a (T,) array per text (position 0, the [CLS], included but never ranked):

- attention: the last layer's attention of the pooled row, mean of heads (the [CLS] row; with mean pooling,
  the mean of the rows);
- rollout: attention rollout through every layer (plotting/rollout.py), the pooled row;
- attention_norm, attention_norm_rollout: the same two of the norm-weighted maps ||alpha_ij f(x_j)|| (Kobayashi
  et al. 2020: the weight times the length of what the key moves), each layer's rows scaled to sum 1 for rollout;
- grad_x_input: gradient x input on the token embedding, summed over its features (captum);
- integrated_gradients: Integrated Gradients on the token embedding (captum's LayerIntegratedGradients) from a
  baseline of [PAD] embeddings (zero) in every word's place, [CLS] and positions kept;
- leave_one_out: the drop in the predicted class's probability when that one word is removed (removal.py);
- random: a seeded random score, the floor any method should beat.

The gradient methods explain the predicted class's logit (a probability saturates near 1, and its gradient
with it). Shapes: N texts, B a batch, T tokens, D d_model, C classes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from captum.attr import LayerGradientXActivation, LayerIntegratedGradients
from torch import nn

from ..inference import batched, forward_batches, logit_function, pad_id_of, probabilities
from ..model.classifier import TransformerClassifier
from ..plotting.rollout import attention_rollout, pooled_rollout
from .passes import Passes
from .removal import without

ATTRIBUTIONS = (
    "attention",
    "rollout",
    "attention_norm",
    "attention_norm_rollout",
    "grad_x_input",
    "integrated_gradients",
    "leave_one_out",
    "random",
)
MAP_METHODS = {"weights": ("attention", "rollout"), "norms": ("attention_norm", "attention_norm_rollout")}
LABELS = {  # how pages and tables name each method (the page reads them from its data)
    "attention": "attention (last layer)",
    "rollout": "rollout",
    "attention_norm": "attention x norm (last layer)",
    "attention_norm_rollout": "rollout of attention x norm",
    "grad_x_input": "gradient x input",
    "integrated_gradients": "Integrated Gradients",
    "leave_one_out": "leave-one-out",
    "random": "random",
}


def attribute(
    net: TransformerClassifier,
    rows: Sequence[Sequence[int]],
    targets: Sequence[int],
    *,
    mask_id: int | None,
    methods: Sequence[str] = ATTRIBUTIONS,
    ig_steps: int = 32,
    seed: int = 0,
    batch_size: int = 256,
) -> tuple[list[dict[str, np.ndarray]], float]:
    """Each method's (T,) attribution of every row of `rows` (token ids, [CLS] first) to its class in
    `targets`, and Integrated Gradients' mean relative completeness error (|sum of attributions - (f(x) - f(baseline))|
    / |f(x) - f(baseline)|: how well its `ig_steps` approximate the integral; NaN when not computed).
    `mask_id`: what leave-one-out puts in a word's place (None: delete it)."""
    unknown = [m for m in methods if m not in ATTRIBUTIONS]
    if unknown:
        raise ValueError(f"unknown attribution methods {unknown}: expected some of {', '.join(ATTRIBUTIONS)}")
    out: list[dict[str, np.ndarray]] = [{} for _ in rows]
    ig_error = float("nan")
    for kind, names in MAP_METHODS.items():
        if set(names) & set(methods):
            _attention(net, rows, out, methods=methods, names=names, norms=kind == "norms", batch_size=batch_size)
    if "grad_x_input" in methods or "integrated_gradients" in methods:
        ig_error = _gradients(net, rows, targets, out, methods=methods, steps=ig_steps, batch_size=batch_size)
    if "leave_one_out" in methods:
        _leave_one_out(net, rows, targets, out, mask_id=mask_id, batch_size=batch_size)
    if "random" in methods:
        rng = np.random.default_rng(seed)
        for i, row in enumerate(rows):
            out[i]["random"] = rng.random(len(row))
    return [{m: r[m] for m in methods} for r in out], ig_error


def passes(rows: Sequence[Sequence[int]], *, methods: Sequence[str] = ATTRIBUTIONS, ig_steps: int = 32) -> Passes:
    """The model work of `attribute` on `rows`: one pass of every row for the attention maps, a forward and a
    backward one for gradient x input; for Integrated Gradients `ig_steps` of each, and four forward ones more
    (captum's: the embedding of the text and of the baseline, and both again for the completeness error); and
    leave-one-out's row with each of its words removed, and the row itself (a pass more for the norm maps)."""
    n, chosen = len(rows), set(methods)
    total = Passes()
    for names in MAP_METHODS.values():
        total += Passes(forward=n) if set(names) & chosen else Passes()
    if "grad_x_input" in chosen:
        total += Passes(forward=n, backward=n)
    if "integrated_gradients" in chosen:
        total += Passes(forward=(ig_steps + 4) * n, backward=ig_steps * n)
    if "leave_one_out" in chosen:
        total += Passes(forward=sum(len(row) for row in rows))
    return total


def _attention(
    net: TransformerClassifier, rows, out, *, methods, names: tuple[str, str], norms: bool, batch_size: int
) -> None:
    """The pooled row of the last layer's head mean, and of the rollout, for every row, stored under `names`:
    of the weights, or of the norm-weighted maps (`norms`; their head means' rows scaled to sum 1 for rollout)."""
    pooling, (last_name, rollout_name) = net.config.pooling, names
    data = batched(net, rows, batch_size=batch_size, by_length=True)
    for batch, result in forward_batches(net, data, need_weights=not norms, need_norms=norms):
        assert result.attentions is not None  # asked for: weights or norm-weighted maps
        for b, i in enumerate(batch.index):
            T = len(rows[i])
            means = [a[b, :, :T, :T].double().cpu().numpy().mean(axis=0) for a in result.attentions]  # L x (T, T)
            if last_name in methods:
                out[i][last_name] = means[-1][0] if pooling == "cls" else means[-1].mean(axis=0)
            if rollout_name in methods:
                if norms:  # each row a share of what reaches its query, as rollout mixes with the residual
                    means = [m / np.clip(m.sum(axis=-1, keepdims=True), 1e-12, None) for m in means]
                out[i][rollout_name] = pooled_rollout(attention_rollout(means), pooling).astype(np.float64)


def _gradients(net: nn.Module, rows, targets, out, *, methods, steps: int, batch_size: int) -> float:
    """Gradient x input and Integrated Gradients on the token embedding (captum, calling `logit_function`), summed
    over its D features; returns IG's mean relative completeness error."""
    logits, embedding, pad_id = logit_function(net), net.embedding, pad_id_of(net)
    errors = []
    for batch in batched(net, rows, batch_size=max(1, batch_size // steps), by_length=True):
        ids, mask, index = batch.ids, batch.mask, batch.index  # (B, T)
        target = torch.tensor([int(targets[i]) for i in index], device=ids.device)  # (B,)
        if "grad_x_input" in methods:
            gxi = LayerGradientXActivation(logits, embedding).attribute(
                ids, target=target, additional_forward_args=(mask,)
            )  # (B, T, D)
            _store(out, index, rows, "grad_x_input", gxi.sum(dim=-1))
        if "integrated_gradients" in methods:
            baseline = ids.masked_fill(mask, pad_id)  # (B, T): [PAD] (a zero embedding) for every word ...
            baseline[:, 0] = ids[:, 0]  # ... and [CLS] kept: only the words' contribution is measured
            ig, delta = LayerIntegratedGradients(logits, embedding).attribute(
                ids,
                baselines=baseline,
                target=target,
                additional_forward_args=(mask,),
                n_steps=steps,
                internal_batch_size=batch_size,
                return_convergence_delta=True,
            )  # (B, T, D), (B,)
            per_token = ig.sum(dim=-1)  # (B, T)
            _store(out, index, rows, "integrated_gradients", per_token)
            total = per_token.sum(dim=-1).detach().abs()  # |f(x) - f(baseline)| up to the error
            errors += (delta.detach().abs() / total.clamp(min=1e-12)).tolist()
    return float(np.mean(errors)) if errors else float("nan")


def _store(out, index: list[int], rows, method: str, values: torch.Tensor) -> None:
    """Each row's (T,) slice of (B, T) `values`, padding cut off."""
    found = values.detach().double().cpu().numpy()
    for b, i in enumerate(index):
        out[i][method] = found[b, : len(rows[i])]


def _leave_one_out(net: nn.Module, rows, targets, out, *, mask_id: int | None, batch_size: int) -> None:
    """p(target | text) - p(target | text without word i), for every word i of every row, in one batched pass."""
    variants, owners = [], []
    for i, row in enumerate(rows):
        variants.append(list(row))
        owners.append((i, 0))
        for pos in range(1, len(row)):
            variants.append(without(row, {pos}, mask_id))
            owners.append((i, pos))
    probs = probabilities(net, variants, batch_size=batch_size)  # (V, C)
    full: dict[int, float] = {}
    for (i, pos), p in zip(owners, probs, strict=True):
        target = int(targets[i])
        if pos == 0:
            full[i] = p[target]
            out[i]["leave_one_out"] = np.zeros(len(rows[i]))
        else:
            out[i]["leave_one_out"][pos] = full[i] - p[target]
