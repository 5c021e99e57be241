"""How faithful each token attribution (attributions.py) is to the model, by the ERASER measures (DeYoung et al.
2020, "ERASER: A Benchmark to Evaluate Rationalized NLP Models"), for the class the model predicts, y:

- comprehensiveness at k%: p(y | text) - p(y | text without its top k% words): high when the words a method
  ranks first are the ones the prediction needs;
- sufficiency at k%: p(y | text) - p(y | its top k% words alone): low when they are enough on their own;
- AOPC, the area over the deletion curve: the mean of p(y | text) - p(y | text without its top j% words) over
  j = 0, 10, ..., 100 (DeYoung et al.'s 1 / (|B| + 1) sum over bins, the bins every 10%); normalized AOPC and each
  method's agreement (Kendall tau) with leave-one-out and Integrated Gradients: agreement.py.

"Top k%" is the ceil(k% x n) best-ranked of a text's n words (ties: the earlier word first). Words are removed
as `removal` says (removal.py). Shapes: N texts, T tokens, C classes.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.progress import progress as progress_of
from ..inference import probabilities
from ..model.classifier import TransformerClassifier
from . import attributions
from . import methods as registry
from .agreement import agreement, aopc_bounds, bounds_passes
from .agreement import normalized as normalized_aopc
from .attributions import attribute
from .passes import Passes
from .plausibility import LONG_TOKENS, Rerun, add_plausibility
from .removal import keeping, without
from .report import CURVE, NEAR_EVEN, Faithfulness

__all__ = ["Explained", "Faithfulness", "eraser_scores", "explain_texts", "faithfulness", "passes"]

EXAMPLES = 20  # texts whose tokens and attributions the report keeps (scores are kept for every text)
LONG_TEXTS = 200  # off a terminal, this many texts or more log where they are (IMDB's take minutes)
CHUNK = 32  # texts attributed and scored together: a step of the progress bar, and a bound on memory


def ranked(scores: np.ndarray) -> list[int]:
    """A text's word positions (1..T-1; [CLS] at 0 is never ranked), highest score first, ties by position."""
    return [int(p) + 1 for p in np.argsort(-np.asarray(scores[1:], dtype=np.float64), kind="stable")]


def top_count(k: float, n: int) -> int:
    """How many of `n` words "the top k%" is: ceil(k% x n), at least one word of a non-empty text."""
    return min(n, math.ceil(k * n / 100 - 1e-9))


def eraser_scores(
    net: TransformerClassifier,
    rows: Sequence[Sequence[int]],
    targets: Sequence[int],
    attributions: Sequence[dict[str, np.ndarray]],
    *,
    k: Sequence[float],
    mask_id: int | None,
    batch_size: int = 256,
) -> list[dict[str, dict[str, float | list[float]]]]:
    """Per text, per method: comprehensiveness and sufficiency at each k, their means over k, the deletion curve
    (the drop at each CURVE point) and AOPC. Every distinct perturbed text goes through the model once."""
    variants: dict[tuple[int, ...], int] = {}

    def slot(ids: list[int]) -> int:
        return variants.setdefault(tuple(ids), len(variants))

    plans = []  # per text: (full slot, {method: (curve slots, comprehensiveness slots, sufficiency slots)})
    for row, methods in zip(rows, attributions, strict=True):
        n = len(row) - 1
        plan = {}
        for method, method_scores in methods.items():
            order = ranked(method_scores)
            curve = [slot(without(row, set(order[: top_count(j, n)]), mask_id)) for j in CURVE]
            comp = [slot(without(row, set(order[: top_count(q, n)]), mask_id)) for q in k]
            suff = [slot(keeping(row, set(order[: top_count(q, n)]), mask_id)) for q in k]
            plan[method] = (curve, comp, suff)
        plans.append((slot(list(row)), plan))
    probs = probabilities(net, [list(v) for v in variants], batch_size=batch_size)  # (V, C)
    results = []
    for (full, plan), target in zip(plans, targets, strict=True):
        p = probs[:, int(target)]  # (V,)
        text = {}
        for method, (curve, comp, suff) in plan.items():
            drops = [float(p[full] - p[s]) for s in curve]
            scores: dict[str, float | list[float]] = {"curve": drops, "aopc": float(np.mean(drops))}
            for q, c, s in zip(k, comp, suff, strict=True):
                scores[f"comprehensiveness@{q:g}"] = float(p[full] - p[c])
                scores[f"sufficiency@{q:g}"] = float(p[full] - p[s])
            scores["comprehensiveness"] = float(np.mean([scores[f"comprehensiveness@{q:g}"] for q in k]))
            scores["sufficiency"] = float(np.mean([scores[f"sufficiency@{q:g}"] for q in k]))
            text[method] = scores
        results.append(text)
    return results


def passes(
    rows: Sequence[Sequence[int]],
    *,
    k: Sequence[float],
    methods: Sequence[str] | None,
    ig_steps: int,
    normalized: bool = True,
    classes: int = 2,
) -> Passes:
    """The model work of `faithfulness` (and `explain_texts`) on `rows`, those with no word left out: each text
    for the class it predicts, its attributions (`attributions.passes`), and the texts `eraser_scores` scores
    (the text, and per method one per distinct number of words removed or kept). At most that: a removal two
    methods or two texts share goes through the model once."""
    texts = [row for row in rows if len(row) > 1]
    methods = registry.check_methods(registry.default_names() if methods is None else methods)
    scored = 0
    for row in texts:
        n = len(row) - 1
        removed = {top_count(j, n) for j in CURVE} | {top_count(q, n) for q in k}  # 0: the text itself
        kept = {top_count(q, n) for q in k}  # n: the text itself
        scored += 1 + len(methods) * (len(removed - {0}) + len(kept - {n}))
    total = Passes(forward=len(texts) + scored) + (bounds_passes(texts) if normalized else Passes())
    return total + attributions.passes(texts, methods=methods, ig_steps=ig_steps, classes=classes)


def _aopc(scores: dict[str, float | list[float]]) -> float:
    """A method's AOPC among its ERASER scores (`eraser_scores` stores it as a float)."""
    aopc = scores["aopc"]
    assert isinstance(aopc, float)
    return aopc


@dataclass
class Explained:
    """One text, explained: the class the model predicts, the class explained (`target`: the predicted one unless
    `explain_texts` was given targets) and its probability, each method's (T,) attribution, and each method's
    ERASER scores on this text (measure -> value; "curve": the deletion curve)."""

    predicted: int
    probability: float
    attributions: dict[str, np.ndarray]
    scores: dict[str, dict[str, float | list[float]]]
    target: int = -1


def explain_texts(
    net: TransformerClassifier,
    rows: Sequence[Sequence[int]],
    *,
    k: Sequence[float] = (10, 20, 50),
    mask_id: int | None = None,
    methods: Sequence[str] | None = None,
    ig_steps: int = 32,
    seed: int = 0,
    batch_size: int = 256,
    progress: bool | None = None,
    targets: Sequence[int] | None = None,
    normalized: bool = True,
    seconds: dict[str, float] | None = None,
) -> tuple[list[Explained], float]:
    """Attribute every text of `rows` (token ids, [CLS] first, at least one word each) to the class the model predicts
    for it, or to its class in `targets` (attributions.py), and score each method on it for that class
    (`eraser_scores`), CHUNK texts at a time (a progress bar over the texts on a terminal, log lines every 30 s
    elsewhere; `progress=False`: neither). `mask_id` replaces removed words (None: they are deleted). `methods`:
    registered names (None: all). `seconds`, when given, gains each method's time. Returns one Explained per row and
    Integrated Gradients' mean completeness error."""
    out, errors = [], []
    # a bar on a terminal; elsewhere log lines for a long run only (a short one says nothing)
    long = progress is True or (
        progress is None and (sys.stderr.isatty() or len(rows) >= LONG_TEXTS or sum(map(len, rows)) >= LONG_TOKENS)
    )
    bar = progress_of(len(rows), "faithfulness", "text", show=long)
    for start in range(0, len(rows), CHUNK):
        chunk = [list(map(int, r)) for r in rows[start : start + CHUNK]]
        probs = probabilities(net, chunk, batch_size=batch_size)  # (n, C)
        predicted = [int(p.argmax()) for p in probs]
        wanted = predicted if targets is None else [int(t) for t in targets[start : start + len(chunk)]]
        options = {"ig_steps": ig_steps, "seed": seed + start, "batch_size": batch_size}
        found, ig_error = attribute(net, chunk, wanted, mask_id=mask_id, methods=methods, seconds=seconds, **options)
        scores = eraser_scores(net, chunk, wanted, found, k=k, mask_id=mask_id, batch_size=batch_size)
        full = [float(p[y]) for p, y in zip(probs, wanted, strict=True)]
        bounds = (
            aopc_bounds(net, chunk, wanted, full, mask_id=mask_id, curve=CURVE, count=top_count, batch_size=batch_size)
            if normalized
            else [(math.nan, math.nan)] * len(chunk)  # no nAOPC: its search is the costliest part
        )
        for text, found_text, (lower, upper) in zip(scores, found, bounds, strict=True):
            aopcs = [_aopc(text[m]) for m in text]  # a method's order that beats the search widens the bounds
            lower, upper = min(lower, *aopcs), max(upper, *aopcs)  # NaN (no search) stays NaN
            for method, agree in agreement(found_text).items():
                text[method].update(agree, naopc=normalized_aopc(_aopc(text[method]), lower, upper))
        out += [
            Explained(predicted=c, probability=float(p[y]), attributions=a, scores=s, target=y)
            for c, y, p, a, s in zip(predicted, wanted, probs, found, scores, strict=True)
        ]
        errors.append(ig_error)
        bar.update(len(chunk))
    bar.close()
    return out, float(np.nanmean(errors)) if errors and not np.isnan(errors).all() else float("nan")


def faithfulness(
    net: TransformerClassifier,
    rows: Sequence[Sequence[int]],
    *,
    tokens: Sequence[Sequence[str]],
    split: str,
    removal: str = "mask",
    mask_id: int | None = None,
    k: Sequence[float] = (10, 20, 50),
    methods: Sequence[str] | None = None,
    **options: Any,
) -> Faithfulness:
    """Each method's ERASER scores on the texts of `rows`, averaged (`explain_texts`, which takes `options`:
    ig_steps, seed, batch_size, progress, targets: one class per row); `tokens`: the rows' tokens, for the examples.
    `removal` says how words are removed ("mask" or "delete", for the report), `mask_id` the id that replaces
    them (None: they are deleted; removal.replacement gives both)."""
    kept = [i for i, r in enumerate(rows) if len(r) > 1]  # a text with no word has nothing to rank
    if options.get("targets") is not None:
        options["targets"] = [options["targets"][i] for i in kept]
    rationales = options.pop("rationales", None)  # (T,) deciding tokens per row, or None: plausibility.py
    methods = registry.check_methods(registry.default_names() if methods is None else methods)
    seconds: dict[str, float] = {}
    explained, ig_error = explain_texts(
        net, [rows[i] for i in kept], k=k, mask_id=mask_id, methods=methods, seconds=seconds, **options
    )
    report = Faithfulness(split=split, texts=len(kept), removal=removal, k=[float(q) for q in k], ig_error=ig_error)
    for method in methods:
        measures = [m for m in explained[0].scores[method] if m != "curve"] if explained else []
        values = {m: np.array([e.scores[method][m] for e in explained]) for m in measures}
        values = {m: v[~np.isnan(v)] for m, v in values.items()}  # a text with no tau or bounds counts for none
        report.scores[method] = {m: float(v.mean()) if len(v) else math.nan for m, v in values.items()}
        report.scores[method]["seconds_per_text"] = seconds.get(method, 0.0) / max(1, len(kept))
        report.sem[method] = {
            m: float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0 for m, v in values.items()
        }
        curves = [e.scores[method]["curve"] for e in explained]
        report.curves[method] = np.mean(curves, axis=0).tolist() if curves else []
    if explained:  # nAOPC's texts (a text without bounds has none for any method; its search off: not counted)
        report.naopc_texts = (
            None
            if not options.get("normalized", True)
            else sum(
                any(isinstance(v := s.get("naopc"), float) and not math.isnan(v) for s in e.scores.values())
                for e in explained
            )
        )
        report.near_even = sum(e.probability < (1 + NEAR_EVEN) / 2 for e in explained)
    if rationales is not None:
        rerun = Rerun(
            net=net,
            rows=[rows[i] for i in kept],
            targets=[e.target for e in explained],
            mask_id=mask_id,
            batch_size=options.get("batch_size", 256),
            progress=options.get("progress"),
        )
        found = [e.attributions for e in explained]
        report.plausible = add_plausibility(report, found, [rationales[i] for i in kept], rerun)
    for i, e in zip(kept[:EXAMPLES], explained, strict=False):
        report.examples.append(
            {
                "tokens": list(tokens[i]),
                "predicted": e.predicted,
                "target": e.target,
                "probability": e.probability,
                "attributions": {m: np.round(a, 5).tolist() for m, a in e.attributions.items()},
                "scores": {m: {q: v for q, v in s.items() if q != "curve"} for m, s in e.scores.items()},
            }
        )
    return report
