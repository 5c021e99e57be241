"""Plausibility: how well each method's ranking finds the words known to decide a text (the toy set's generator
knows them: data/toy.py `deciding_words`; a dataset that ships rationales names them in `data.rationale_column`:
data/rationales.py), as ferret scores explanations against human rationales:

- AUPRC: the area under the precision-recall curve of the method's scores over the text's tokens ([CLS] left
  out) against the deciding tokens (scikit-learn's average precision);
- precision@k: the share of the deciding tokens among the method's top k tokens, k = how many there are.

A text whose words are all deciding, or none, says nothing and is left out. Shapes: T tokens.
"""

from __future__ import annotations

import bisect
import math
import re
import string
from collections.abc import Callable, Sequence

import numpy as np
import torch
from tokenizers import Tokenizer
from torchmetrics.functional.classification import binary_average_precision

from .report import Faithfulness


def token_rationale(text: str, words: Sequence[bool] | None, tokenizer: Tokenizer, length: int) -> np.ndarray | None:
    """Each of a row's `length` tokens marked True when the whitespace word it comes from decides (`words`, one
    per word split on spaces; a token is placed by where it starts in `text`, and punctuation decides nothing);
    None when `words` is None or does not line up with the text's words, or the tokens with the row."""
    if words is None:
        return None
    enc = tokenizer.encode(text)
    starts = [m.start() for m in re.finditer(r"\S+", text)]
    if len(enc.ids[:length]) != length or len(starts) != len(words):
        return None
    spans = zip(enc.word_ids[:length], enc.offsets[:length], strict=True)
    return np.array(
        [
            w is not None
            and bool(text[a:b].strip(string.punctuation))
            and bool(words[bisect.bisect_right(starts, a) - 1])
            for w, (a, b) in spans
        ]
    )


def text_scores(scores: np.ndarray, deciding: np.ndarray) -> dict[str, float] | None:
    """AUPRC and precision@k of one method's (T,) `scores` against the (T,) `deciding` tokens ([CLS] left out)."""
    truth, values = deciding[1:], np.asarray(scores[1:], dtype=np.float64)
    k = int(truth.sum())
    if k == 0 or k == len(truth):
        return None
    top = np.argsort(-values, kind="stable")[:k]
    # both arrays are made here (scores, 0/1 truth): torchmetrics' own checks of them cost a fifth of each call
    auprc = binary_average_precision(
        torch.from_numpy(values), torch.from_numpy(truth.astype(np.int64)), validate_args=False
    )
    return {"auprc": float(auprc), "precision_at_k": float(truth[top].mean())}


def add_plausibility(
    report: Faithfulness, attributions: Sequence[dict[str, np.ndarray]], rationales: Sequence[np.ndarray | None]
) -> int:
    """Each method's mean AUPRC and precision@k (with standard errors) over the texts that have a (T,) rationale
    into `report`'s scores; returns how many texts were scored."""
    found: dict[str, dict[str, list[float]]] = {}
    scored = 0
    for methods, deciding in zip(attributions, rationales, strict=True):
        per = {} if deciding is None else {m: text_scores(a, deciding) for m, a in methods.items()}
        if deciding is None or any(v is None for v in per.values()):
            continue
        scored += 1
        for method, measured in per.items():
            for measure, value in (measured or {}).items():
                found.setdefault(method, {}).setdefault(measure, []).append(value)
    for method, measures in found.items():
        for measure, values in measures.items():
            v = np.array(values)
            report.scores[method][measure] = float(v.mean())
            report.sem[method][measure] = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
    return scored


def rationales_of(
    texts: Sequence[str],
    rows: Sequence[Sequence[int]],
    words: Callable[[str], Sequence[bool] | None],
    tokenizer: Tokenizer,
) -> list[np.ndarray | None]:
    """Each row's deciding tokens (`token_rationale`) from its text's deciding words (`words(text)`)."""
    return [token_rationale(t, words(t), tokenizer, len(r)) for t, r in zip(texts, rows, strict=True)]
