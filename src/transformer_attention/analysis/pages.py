"""What a text's page shows of its word attributions, the same on predict.py's pages and a training run's: every
registered method's label, sign and one-line description, the method the text and words tabs open on
(TEXT_METHOD), each method's attribution and, where they were measured, its scores on the text with what they
cannot say there. plotting/page_data.py turns these keyword arguments into the page's data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..inference import evidence_share, pad_id_of
from ..model.classifier import TransformerClassifier
from .agreement import BOUNDS_MAX_WORDS
from .attributions import attribute
from .faithfulness import Explained
from .methods import TEXT_METHOD, Options, methods
from .report import NEAR_EVEN

MEASURES = ("comprehensiveness", "sufficiency", "aopc", "naopc", "tau_leave_one_out", "tau_integrated_gradients")
PAGE_PASSES = 8  # a training run's page computes the methods whose work on its text is at most 8 forward passes


def page_methods() -> dict[str, Any]:
    """The registry's facts every page states: each method's label, sign and description, and the opening one."""
    known = methods()
    return {
        "method_labels": {n: m.label for n, m in known.items()},
        "method_signed": {n: m.signed for n, m in known.items()},
        "method_notes": {n: m.description for n, m in known.items()},
        "text_method": TEXT_METHOD,
    }


def quick_methods(length: int, classes: int) -> list[str]:
    """The methods whose work on a text of `length` tokens costs at most PAGE_PASSES forward passes (TEXT_METHOD
    always): what a training run's pages compute at the end of fit."""
    options = Options()
    cheap = {n for n, m in methods().items() if m.passes(length, classes, options).cost <= PAGE_PASSES}
    return [n for n in methods() if n in cheap or n == TEXT_METHOD]


def quick_words(
    net: TransformerClassifier,
    rows: Sequence[Sequence[int] | np.ndarray],
    targets: Sequence[int],
    names: Mapping[int, str],
) -> list[dict[str, Any]]:
    """A training run's pages' word attributions of `rows` (token ids), each to its class in `targets` (named in
    `names`): the quick methods' for the longest row, in one batch (no scores: their removals cost a pass each),
    and a note naming what predict.py's page of a text adds."""
    chosen = quick_methods(max(map(len, rows)), net.head.out_features)
    found, _ = attribute(net, [list(map(int, r)) for r in rows], list(targets), mask_id=None, methods=chosen)
    left = [m.label for n, m in methods().items() if n not in chosen]
    note = (
        f"A training run's page shows the methods that cost at most {PAGE_PASSES} passes of the model on this "
        f"text; predict.py's page of it (save_attention=html) adds {', '.join(left)} and each method's "
        "faithfulness."
    )
    return [
        {
            "attributions": {m: a.tolist() for m, a in one.items()},
            "target": names[target],
            "words_note": " ".join(n for n in (note if left else "", evidence_note(net, row, target, names)) if n),
            **page_methods(),
        }
        for one, target, row in zip(found, targets, rows, strict=True)
    ]


def evidence_note(
    net: TransformerClassifier, row: Sequence[int] | np.ndarray, target: int | None, names: Mapping[int, str]
) -> str:
    """How much of the text's margin for its class the naive-Bayes n-gram term carries against the encoder's
    (model.nb_ngram_max > 0; empty without that term)."""
    if net.evidence is None or target is None:
        return ""
    ids = torch.as_tensor(np.asarray(row, dtype=np.int64), device=net.head.weight.device)[None]
    share = float(evidence_share(net, ids, ids != pad_id_of(net), torch.tensor([target], device=ids.device))[0])
    return (
        f"The naive-Bayes n-gram term carries {share:.0%} of this text's margin for {names[target]}, the encoder "
        f"{1 - share:.0%}; every method here counts each word's share of that term."
    )


def page_words(
    probabilities: Mapping[str, float], explained: Explained | None, removal: str, agreement: Any, note: str = ""
) -> dict[str, Any]:
    """predict.py's page of a text whose class probabilities are `probabilities` (name -> p): each method's
    attribution, its faithfulness on this text with the notes it needs, its `agreement` over all the texts
    explained (mean +- SE), and `note` over its words (`evidence_note`)."""
    if explained is None:
        return page_methods()
    names = list(probabilities)
    target = names[explained.target]
    first = next(iter(explained.scores.values()))
    k = ", ".join(m.split("@")[1] for m in first if m.startswith("sufficiency@"))
    words = len(next(iter(explained.attributions.values()))) - 1  # tokens but [CLS]
    notes = [
        f"for the class {target}; this text's words {removal}; comprehensiveness and sufficiency: the mean over "
        f"the top {k}% of its words.",
        near_even(probabilities, target),
        naopc_note(explained.scores, words, target),
    ]
    return {
        "attributions": {m: a.tolist() for m, a in explained.attributions.items()},
        "faithfulness": {m: {q: s.get(q) for q in MEASURES} for m, s in explained.scores.items()},
        "faithfulness_note": " ".join(n for n in notes if n),
        "target": target,
        "agreement": agreement,
        "words_note": note,
        **page_methods(),
    }


def near_even(probabilities: Mapping[str, float], target: str) -> str:
    """What a near-even prediction means for a text's scores (empty when the prediction is clear)."""
    p = float(probabilities[target])
    rest = max((float(q) for name, q in probabilities.items() if name != target), default=0.0)
    if p - rest >= NEAR_EVEN:
        return ""
    return (
        f"The model is near even on this text (p({target}) = {p:.2f}, the next class {rest:.2f}): removing a few "
        f"words can move p({target}) either way, so a negative comprehensiveness (removing a method's top words "
        f"raised it) or a small sufficiency says little about the method; compare methods over many texts "
        f"(evaluate.py's faithfulness table)."
    )


def naopc_note(scores: Mapping[str, Mapping[str, Any]], words: int, target: str) -> str:
    """Why a text's nAOPC is missing ("-"), when it is."""
    missing = [m for m, s in scores.items() if s.get("naopc") is None or s["naopc"] != s["naopc"]]
    if not missing:
        return ""
    if words > BOUNDS_MAX_WORDS:
        why = (
            f"this text has {words} words, and its bounds are searched for texts of at most {BOUNDS_MAX_WORDS} "
            "(the search costs n(n + 1) passes)"
        )
    else:
        why = f"no order of removing words moves p({target}) on this text, so the lowest and highest AOPC meet"
    return f"nAOPC (AOPC between the lowest and highest any order of removal reaches) is \u201c-\u201d: {why}."
