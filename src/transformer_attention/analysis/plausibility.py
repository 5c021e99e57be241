"""Plausibility as ERASER measures it (DeYoung et al. 2020; the definitions of their metric code,
rationale_benchmark/metrics.py, mirrored): how well each method's scores find the words known to decide a text
(the toy set's generator knows them: data/toy.py `deciding_words`; a dataset that ships rationales names them in
`data.rationale_column`: data/rationales.py), for every method:

- AUPRC: the area under the precision-recall curve of the method's word scores against the marked words, the
  curve's points joined by straight lines (ERASER's `auprc`: scikit-learn's `auc(recall, precision)`);
- average precision: the same curve as steps (ERASER's `average_precision`: scikit-learn's);
- token F1: the F1 of the method's top-k words against the marked ones, k = how many were marked (so precision,
  recall and F1 are one number); the mean over texts is ERASER's instance-macro F1;
- ERASER comprehensiveness and sufficiency (with a `Rerun`): p(y | text) - p(y | text without the top k% words),
  and p(y | text) - p(y | the top k% words alone), each averaged over k in ERASER_BINS (their AOPC over bins),
  the top k% the int(k% x n) best words of n (ERASER's baselines' count), at least one; y the class explained.

Scored per whitespace word of the text, the unit people marked: a word the tokenizer cut into pieces gets the mean
of its pieces' scores (PIECES: the rule the page's text tab colours attributions by, plotting.words), and is
removed or kept whole. Words the model did not read (cut off at data.max_length) are left out. A text whose words
are all marked, or none, says nothing and is left out. Shapes: T tokens, W words.
"""

from __future__ import annotations

import bisect
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from tokenizers import Tokenizer
from torchmetrics.functional.classification import binary_precision_recall_curve

from ..data.progress import progress
from ..inference import probabilities
from ..model.classifier import TransformerClassifier
from ..plotting.words import Word, word_values
from .removal import keeping, without
from .report import Faithfulness

ERASER_BINS = (1, 5, 10, 20, 50)  # % of a text's words removed or kept (ERASER's AOPC thresholds, metrics.py)
PIECES = "mean"  # how a word's pieces make its one score (plotting.words.word_values)
LONG_TOKENS = 50_000  # off a terminal, reruns of this many tokens or more log where they are (movie reviews: ~60)


class Rationale(NamedTuple):
    """One text's rationale over the W whitespace words the model read: `flags` (W,) what people marked, and
    `words`, the row's tokens grouped by word: `[CLS]` first, then each word's token positions."""

    flags: np.ndarray
    words: list[Word]


def word_rationale(text: str, flags: Sequence[bool] | None, tokenizer: Tokenizer, length: int) -> Rationale | None:
    """The rationale of a row of `length` tokens of `text` from its whitespace words' `flags` (a token belongs to
    the word it starts in); None when `flags` is None or does not line up with the text's words, or the tokens
    with the row."""
    if flags is None:
        return None
    enc = tokenizer.encode(text)
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    if len(enc.ids[:length]) != length or len(spans) != len(flags) or length < 1:
        return None
    starts = [a for a, _ in spans]
    pieces: dict[int, list[int]] = {}  # word -> its token positions, in the order read
    for position, (a, _) in enumerate(enc.offsets[1:length], start=1):  # [CLS] at 0 is no word
        pieces.setdefault(bisect.bisect_right(starts, a) - 1, []).append(position)
    words = [Word(text[slice(*spans[i])], p) for i, p in pieces.items()]
    return Rationale(np.array([bool(flags[i]) for i in pieces]), [Word("[CLS]", [0]), *words])


def word_scores(scores: np.ndarray, rationale: Rationale) -> np.ndarray:
    """(W,) one score per word of `rationale` from a method's (T,) token `scores`: the mean of its pieces'."""
    return word_values(np.asarray(scores, dtype=np.float64), rationale.words, combine=PIECES)[1:]


def text_scores(scores: np.ndarray, flags: np.ndarray) -> dict[str, float] | None:
    """AUPRC, average precision and token F1 of one text's (W,) word `scores` against its (W,) marked words
    `flags`; None when all words or none are marked."""
    truth, values = np.asarray(flags, dtype=bool), np.asarray(scores, dtype=np.float64)
    k = int(truth.sum())
    if k == 0 or k == len(truth):
        return None
    # the scores' dense ranks in [0, 1]: the same curve, and torchmetrics takes values outside [0, 1] for logits
    # (a sigmoid, under which large scores tie); both arrays are made here, so its checks are skipped
    ranks = np.unique(values, return_inverse=True)[1].reshape(-1)
    preds, target = torch.from_numpy(ranks / max(1, ranks.max())), torch.from_numpy(truth.astype(np.int64))
    # as scikit-learn's precision_recall_curve: recall falling to 0, at precision 1 last
    curve = binary_precision_recall_curve(preds, target, validate_args=False)
    precision, recall = (c.double().numpy() for c in curve[:2])
    step = recall[:-1] - recall[1:]  # (points - 1,) >= 0
    top = np.argsort(-values, kind="stable")[:k]  # ties: the earlier word first
    return {
        "auprc": float(np.sum(step * (precision[:-1] + precision[1:]) / 2)),
        "average_precision": float(np.sum(step * precision[:-1])),
        "token_f1": float(truth[top].mean()),
    }


def top_words(k: int, n: int) -> int:
    """How many of `n` words ERASER's "top k%" is: int(k% x n), as their baselines count, at least one."""
    return min(n, max(1, k * n // 100))


@dataclass(frozen=True)
class Rerun:
    """What ERASER's comprehensiveness and sufficiency need: the model, the scored texts' rows (token ids, [CLS]
    first), the class explained in each, and how words are removed (`mask_id`; None: deleted)."""

    net: TransformerClassifier
    rows: Sequence[Sequence[int]]
    targets: Sequence[int]
    mask_id: int | None
    batch_size: int = 256
    progress: bool | None = None  # None: a bar on a terminal, elsewhere log lines for LONG_TOKENS or more


def removal_scores(
    rerun: Rerun, attributions: Sequence[dict[str, np.ndarray]], rationales: Sequence[Rationale | None]
) -> list[dict[str, dict[str, float]] | None]:
    """Per text with a rationale, per method: ERASER's comprehensiveness and sufficiency (`text_removals`); None
    for a text without one."""
    todo = sum(len(r) for r, w in zip(rerun.rows, rationales, strict=True) if w is not None)
    long = rerun.progress is True or (rerun.progress is None and (sys.stderr.isatty() or todo >= LONG_TOKENS))
    bar = progress(sum(w is not None for w in rationales), "plausibility (ERASER per word)", "text", show=long)
    out: list[dict[str, dict[str, float]] | None] = []
    for row, target, methods, rationale in zip(rerun.rows, rerun.targets, attributions, rationales, strict=True):
        out.append(None if rationale is None else text_removals(rerun, row, int(target), methods, rationale))
        bar.update(int(rationale is not None))
    bar.close()
    return out


def text_removals(
    rerun: Rerun, row: Sequence[int], target: int, methods: dict[str, np.ndarray], rationale: Rationale
) -> dict[str, dict[str, float]]:
    """Each method's ERASER comprehensiveness and sufficiency on one text, over ERASER_BINS, whole words removed or
    kept. The text's distinct variants go through the model once."""
    variants: dict[tuple[int, ...], int] = {tuple(map(int, row)): 0}

    def slot(ids: list[int]) -> int:
        return variants.setdefault(tuple(ids), len(variants))

    plan: dict[str, list[tuple[int, int]]] = {}  # method -> per bin (without, keeping) slots
    for method, scores in methods.items():
        order = np.argsort(-word_scores(scores, rationale), kind="stable")  # ties: the earlier word first
        plan[method] = []
        for q in ERASER_BINS:
            chosen = {p for i in order[: top_words(q, len(order))] for p in rationale.words[i + 1].tokens}
            removed, kept = without(row, chosen, rerun.mask_id), keeping(row, chosen, rerun.mask_id)
            plan[method].append((slot(removed), slot(kept)))
    p = probabilities(rerun.net, [list(v) for v in variants], batch_size=rerun.batch_size)[:, target]  # (V,)
    return {
        method: {
            "eraser_comprehensiveness": float(np.mean([p[0] - p[c] for c, _ in slots])),
            "eraser_sufficiency": float(np.mean([p[0] - p[s] for _, s in slots])),
        }
        for method, slots in plan.items()
    }


def add_plausibility(
    report: Faithfulness,
    attributions: Sequence[dict[str, np.ndarray]],
    rationales: Sequence[Rationale | None],
    rerun: Rerun | None = None,
) -> int:
    """Each method's mean AUPRC, average precision and token F1 (and, with `rerun`, ERASER's comprehensiveness and
    sufficiency per word), with standard errors, over the texts whose rationale marks some words but not all, into
    `report`'s scores; returns how many texts were scored."""
    usable = [r if r is not None and 0 < r.flags.sum() < len(r.flags) else None for r in rationales]
    found: dict[str, dict[str, list[float]]] = {}
    for methods, rationale in zip(attributions, usable, strict=True):
        for method, scores in methods.items() if rationale is not None else ():
            assert rationale is not None
            for measure, value in (text_scores(word_scores(scores, rationale), rationale.flags) or {}).items():
                found.setdefault(method, {}).setdefault(measure, []).append(value)
    if rerun is not None and found:
        for text in removal_scores(rerun, attributions, usable):
            for method, measured in (text or {}).items():
                for measure, value in measured.items():
                    found[method].setdefault(measure, []).append(value)
    for method, measures in found.items():
        for measure, values in measures.items():
            v = np.array(values)
            report.scores[method][measure] = float(v.mean())
            report.sem[method][measure] = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
    return sum(r is not None for r in usable)


def rationales_of(
    texts: Sequence[str],
    rows: Sequence[Sequence[int]],
    words: Callable[[str], Sequence[bool] | None],
    tokenizer: Tokenizer,
) -> list[Rationale | None]:
    """Each row's rationale (`word_rationale`) from its text's marked words (`words(text)`)."""
    return [word_rationale(t, words(t), tokenizer, len(r)) for t, r in zip(texts, rows, strict=True)]
